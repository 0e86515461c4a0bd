"""Exercise stubs: copy them with `python -m minattn exercises DIR`, implement one function at a
time, and grade it with `python -m minattn check DIR/01_softmax.py` (see walkthrough.md)."""
