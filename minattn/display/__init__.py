"""Showing attention: terminal heatmaps (terminal.py) and PNG figures with matplotlib (plot.py)."""
