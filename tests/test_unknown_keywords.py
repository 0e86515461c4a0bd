"""A keyword that no block or attention takes is refused by name where the call was made (issue
66): every public model entry point that passes its **keywords on to the blocks checks them at
its entry (engine/decoder_checks.check_keywords), before anything is computed, instead of
letting a sublayer deep inside raise Python's TypeError with its own name."""
import ast
from pathlib import Path

import numpy as np
import pytest

import minattn as ma
from minattn import hooks, transformer_decoder
from minattn.engine import decoder_checks

D, H, V = 8, 2, 11
LM, CONFIG = ma.init_causal_lm(np.random.default_rng(0), V, 2, D, H, 16)
TOKENS = np.array([[1, 2, 3]])
X = np.random.default_rng(1).normal(size=(1, 3, D))
BLOCKS = {"layers": LM["layers"]}
RNG = np.random.default_rng

# entry point -> (the name its refusal gives, a call taking **keywords); a call through generate
# or the hooks reaches causal_lm, which names itself; init_causal_lm's block_config goes to
# init_decoder, which refuses it before a block is drawn
CALLS = {
    "causal_lm": ("causal_lm", lambda **k: ma.causal_lm(LM, TOKENS, **CONFIG, **k)),
    "decoder": ("decoder", lambda **k: ma.decoder(BLOCKS, X, n_heads=H, **k)),
    "decoder_block": ("decoder_block",
                      lambda **k: ma.decoder_block(LM["layers"][0], X, n_heads=H, **k)),
    "init_causal_lm": ("init_decoder", lambda **k: ma.init_causal_lm(RNG(0), V, 1, D, H, 16,
                                                                         **k)),
    "init_decoder": ("init_decoder", lambda **k: ma.init_decoder(RNG(0), 1, D, H, 16, **k)),
    "generate": ("causal_lm", lambda **k: ma.generate(LM, TOKENS, 2, **CONFIG, **k)),
    "run_with_cache": ("causal_lm", lambda **k: hooks.run_with_cache(LM, TOKENS, **CONFIG, **k)),
    "causal_lm(hooks=)": ("causal_lm", lambda **k: ma.causal_lm(LM, TOKENS, hooks={}, **CONFIG,
                                                                **k)),
}


@pytest.mark.parametrize("entry", sorted(CALLS))
def test_an_unknown_keyword_is_refused_by_name_at_the_entry(entry, monkeypatch):
    name, call = CALLS[entry]
    call()  # the same call without it runs
    ran = []
    attend = ma.scaled_dot_product_attention
    with ma.swap(scaled_dot_product_attention=lambda *a, **k: ran.append(1) or attend(*a, **k)):
        with pytest.raises(TypeError) as refused:
            call(n_kv_head=1)
    message = str(refused.value)
    assert message.startswith(f"{name}() got unknown keyword argument 'n_kv_head'"), message
    assert "did you mean 'n_kv_heads'?" in message
    assert refused.traceback[-1].name == "check_keywords"  # not from a sublayer
    assert not ran  # refused before any attention was computed


def test_several_unknown_keywords_are_all_named():
    with pytest.raises(TypeError, match=r"arguments 'bogus', 'rope_bse'.*did you mean 'rope_base'"):
        ma.causal_lm(LM, TOKENS, bogus=1, rope_bse=2.0, **CONFIG)


def _plug(params, x, mask=None, *, n_heads, n_kv_heads=None, d_k=None, positions=None, eps=1e-6,
          cache=None, width=None):
    # an attention plug with a keyword of its own, width
    return ma.self_attention(params, x, mask, n_heads=n_heads, n_kv_heads=n_kv_heads, d_k=d_k,
                             positions=positions, eps=eps, cache=cache)


def test_a_plugged_attention_takes_its_own_keywords():
    # attention= (one function or one a layer) adds the keywords it names; minattn's are kept
    out = ma.causal_lm(LM, TOKENS, attention=_plug, width=3, **CONFIG)
    np.testing.assert_array_equal(out, ma.causal_lm(LM, TOKENS, **CONFIG))
    ma.causal_lm(LM, TOKENS, attention=[_plug, _plug], width=[3, 4], **CONFIG)
    hooked = ma.causal_lm(LM, TOKENS, attention=_plug, width=3, hooks={}, **CONFIG)  # wrapped
    np.testing.assert_array_equal(hooked, out)
    with pytest.raises(TypeError, match="decoder_block.. got unknown keyword argument 'depth'"):
        ma.decoder_block(LM["layers"][0], X, n_heads=H, attention=_plug, depth=3)
    for config in ({"attention": _plug}, {"attention": _plug, "hooks": {}}):
        with pytest.raises(TypeError, match="causal_lm.. got unknown keyword argument 'depth'"):
            ma.causal_lm(LM, TOKENS, depth=3, **config, **CONFIG)


def test_a_plug_that_takes_any_keyword_is_not_second_guessed():
    # a plug with **keywords may read any: nothing is refused on its behalf
    def anything(params, x, mask=None, *, n_heads, cache=None, **config):
        return ma.self_attention(params, x, mask, n_heads=n_heads, cache=cache)

    ma.causal_lm(LM, TOKENS, attention=anything, depth=3, **CONFIG)


def test_the_keywords_taken_follow_the_signature_a_dispatched_function_shows():
    # read from the signature shown, which grows as a variant registers (engine/variants.py's
    # show): the check keeps no stale list
    from minattn.engine import variants

    @variants.dispatch
    def block(x, *, n_heads):
        return x

    assert decoder_checks._keywords(block) == {"n_heads"}
    with pytest.raises(TypeError, match="block.. got unknown keyword argument 'scale'"):
        decoder_checks.check_keywords("block", {"scale": 2.0}, (block,))
    variants.show(block, scale=None)
    assert decoder_checks._keywords(block) == {"n_heads", "scale"}
    decoder_checks.check_keywords("block", {"scale": 2.0}, (block,))


def test_every_public_entry_that_passes_keywords_on_to_the_blocks_is_checked():
    # The class, not the example: a public function of the model modules that takes **keywords
    # and passes them to the blocks (or to causal_lm) is in CALLS, so a new one must be added.
    package = Path(ma.__file__).parent
    forwarding = set()
    for module in ("language_model", "transformer_decoder", "generation", "hooks"):
        tree = ast.parse((package / f"{module}.py").read_text(encoding="utf-8"))
        for node in tree.body:
            if isinstance(node, ast.FunctionDef) and not node.name.startswith("_") and \
                    node.args.kwarg is not None and not node.name.endswith(
                        ("_with_hooks", "final_logits")):  # variants; final_logits reads two
                forwarding.add(node.name)
    assert forwarding <= set(CALLS), sorted(forwarding - set(CALLS))
