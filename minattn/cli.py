"""The command line: `python -m minattn` runs the worked example."""
import argparse

import numpy as np

from . import scaled_dot_product_attention


def worked_example():
    q = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])  # Q = K: self-attention over 3 tokens
    v = np.array([[2.0, 1.0], [1.0, 3.0], [0.0, 2.0]])
    out, weights = scaled_dot_product_attention(q, q, v)
    scores = q @ q.T / np.sqrt(2.0)
    with np.printoptions(precision=4, suppress=True):
        print("Worked example: Q = K =\n", q, "\nV =\n", v)
        print("scores = Q K^T / sqrt(2) =\n", scores)
        print("weights = softmax(scores) =\n", weights)
        print("output = weights V =\n", out)


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m minattn", description=__doc__)
    parser.parse_args(argv)
    worked_example()
    return 0
