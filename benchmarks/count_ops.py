"""How many array operations (each one at least one kernel launch on a GPU) minattn's encoder
block runs, forward and with its gradient. Counted on the CuPy test double, on the CPU: every
NumPy function or ufunc call that reaches a device array is one operation.

    python benchmarks/count_ops.py [--n-heads 8]
"""
import argparse
import os
import sys

import numpy as np
from autograd import grad

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
sys.path.insert(0, ROOT)
import minattn as ma  # noqa: E402
from minattn.engine import cupy_autograd  # noqa: E402
from tests import array_double  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n-heads", type=int, default=8)
    args = parser.parse_args()
    counts = {"n": 0}
    ufunc, function = array_double.DeviceArray.__array_ufunc__, array_double.DeviceArray.__array_function__

    def counted(method):
        def wrapper(*a, **k):
            result = method(*a, **k)
            if result is not NotImplemented:
                counts["n"] += 1
            return result
        return wrapper

    array_double.DeviceArray.__array_ufunc__ = counted(ufunc)
    array_double.DeviceArray.__array_function__ = counted(function)
    cupy_autograd.register(array_double.DeviceArray)
    d_model, h = 64, args.n_heads
    params = array_double.to_device(ma.init_encoder_block(np.random.default_rng(0), d_model, h, 128))
    x = array_double.to_device(np.random.default_rng(1).normal(size=(2, 16, d_model)))
    for label, run in (("forward", lambda: ma.encoder_block(params, x, n_heads=h)),
                       ("forward + gradient", lambda: grad(
                           lambda p: ma.encoder_block(p, x, n_heads=h).sum())(params))):
        counts["n"] = 0
        run()
        print(f"encoder block ({h} heads), {label}: {counts['n']} array operations")


if __name__ == "__main__":
    main()
