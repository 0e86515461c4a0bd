"""Showing attention: terminal heatmaps (terminal.py), PNG figures with matplotlib (plot.py), and
one self-contained HTML page with a head view and a matrix view (html.py)."""
