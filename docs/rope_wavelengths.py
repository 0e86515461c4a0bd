"""The RoPE wavelengths of a head before and after scaling:
python docs/rope_wavelengths.py [--out docs/figures/rope_wavelengths.png]

Llama 3.1's settings (head width 128, base 500000, original context 8192, factor 8): the
wavelength 2 pi / theta_i of each feature pair i under default RoPE and under the linear, YaRN
and llama3 schedules of minattn.rope_scaling, with the original context as a horizontal line.
"""
import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from minattn.rope_scaling import rope_frequencies  # noqa: E402

N, FACTOR, D, BASE = 8192, 8.0, 128, 500000.0
SCHEDULES = {
    "default": None,
    "linear": {"rope_type": "linear", "factor": FACTOR},
    "yarn": {"rope_type": "yarn", "factor": FACTOR, "original_max_position_embeddings": N},
    "llama3": {"rope_type": "llama3", "factor": FACTOR, "low_freq_factor": 1.0,
               "high_freq_factor": 4.0, "original_max_position_embeddings": N},
}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    here = os.path.dirname(os.path.abspath(__file__))
    parser.add_argument("--out", default=os.path.join(here, "figures", "rope_wavelengths.png"))
    args = parser.parse_args(argv)
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    for name, scaling in SCHEDULES.items():
        inv_freq, _ = rope_frequencies(D, np.arange(1), base=BASE, scaling=scaling)
        ax.plot(2 * np.pi / inv_freq, label=name, lw=1.5)
    ax.axhline(N, color="gray", ls="--", lw=1, label=f"original context {N}")
    ax.set(yscale="log", xlabel="feature pair i", ylabel="wavelength (positions)",
           title=f"RoPE wavelengths, d={D}, base={BASE:g}, factor {FACTOR:g}")
    ax.legend()
    fig.tight_layout()
    fig.savefig(args.out, dpi=120)
    print(args.out)


if __name__ == "__main__":
    main()
