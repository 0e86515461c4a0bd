"""One eps default per kind of norm, across every public function that takes one: layer_norm's
(1e-5, torch's nn.LayerNorm's) wherever a LayerNorm is applied, rms_norm's (1e-6) wherever an
RMSNorm is (QK-norm, a per-head norm, a latent's), l2_normalize's for the L2 norm; a block whose
kind of norm is a keyword (norm="layer_norm" or "rms_norm") defaults to None, each norm its own
kind's default. The course's plain forms (course/teaching.py, the walkthrough's) and the
exercises' stubs follow the same rule.

The functions are found by walking the signatures (the concept modules, the families, the
course's plain forms and stubs), so a new one fails here until its kind is named."""
import importlib
import importlib.util
import inspect
import pkgutil
from pathlib import Path

import numpy as np
import pytest

import minattn as ma
import minattn.course.teaching
import minattn.families

EXERCISES = Path(minattn.course.teaching.__file__).parent / "exercises"

# function name -> the kind of norm its eps is for ("block": the norm keyword says which)
KINDS = {
    "layer_norm": "layer_norm", "encoder_block": "layer_norm", "encoder": "layer_norm",
    "rms_norm": "rms_norm", "self_attention": "rms_norm", "gated_attention": "rms_norm",
    "differential_attention": "rms_norm", "gated_rms_norm": "rms_norm",
    "gated_deltanet": "rms_norm", "latent_attention": "rms_norm",
    "language_model": "rms_norm", "decoder_block (course)": "rms_norm",
    "cached_decoder_block": "rms_norm", "cached_language_model": "rms_norm",
    "l2_normalize": "l2_normalize",
    # a sentence embedding's normalisation, torch's F.normalize: x / max(|x|, eps), eps a floor
    # under the norm (1e-12), not a term inside the square root: a kind of its own
    "l2_normalize (sentence embeddings)": "floor",
    "decoder_block": "block", "causal_lm": "block", "sandwich_block": "block",
    "parallel_block": "block", "block": "block",
}
DEFAULTS = {kind: inspect.signature(f).parameters["eps"].default
            for kind, f in (("layer_norm", ma.layer_norm), ("rms_norm", ma.rms_norm),
                            ("l2_normalize", ma.l2_normalize))} | {"block": None, "floor": 1e-12}


def _modules():
    concepts = [importlib.import_module(f"minattn.{m.name}")
                for m in pkgutil.iter_modules(ma.__path__) if not m.ispkg and m.name != "__main__"]
    families = [importlib.import_module(f"minattn.families.{m.name}")
                for m in pkgutil.iter_modules(minattn.families.__path__)]
    stubs = []
    for path in sorted(EXERCISES.glob("[0-9]*.py")):
        spec = importlib.util.spec_from_file_location(f"stub_{path.stem}", path)
        stub = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(stub)
        stubs.append(stub)
    return [ma, *concepts, *families, minattn.course.teaching, *stubs]


def _eps_defaults():
    # -> [(where, name, kind key, parameter, default)] for every public eps of every module
    found = {}
    for module in _modules():
        for name, f in vars(module).items():
            if name.startswith("_") or not callable(f) or \
                    getattr(f, "__module__", None) not in (module.__name__, "minattn"):
                continue
            try:
                parameters = inspect.signature(f).parameters
            except (TypeError, ValueError):
                continue
            course = module is minattn.course.teaching or module.__name__.startswith("stub_")
            key = f"{name} (course)" if course and f"{name} (course)" in KINDS else \
                f"{name} (sentence embeddings)" if module.__name__.endswith("pretrained") else name
            for p in parameters.values():  # an eps given a default (a required one is given)
                if (p.name == "eps" or p.name.endswith("_eps")) and p.default is not p.empty:
                    found[(module.__name__, name, p.name)] = (key, p.default)
    return found


FOUND = _eps_defaults()


def test_every_function_taking_eps_has_its_kind_named():
    assert {key for key, _ in FOUND.values()} == set(KINDS)


@pytest.mark.parametrize("where", sorted(FOUND), ids=lambda w: f"{w[0]}.{w[1]}")
def test_each_eps_defaults_to_its_kinds_one_default(where):
    key, default = FOUND[where]
    assert default == DEFAULTS[KINDS[key]] and type(default) is type(DEFAULTS[KINDS[key]]), (
        f"{where[0]}.{where[1]}'s {where[2]}={default!r}: the {KINDS[key]}'s default is "
        f"{DEFAULTS[KINDS[key]]!r}")


def test_the_defaults_are_torchs_and_llamas():
    assert DEFAULTS["layer_norm"] == 1e-5 and DEFAULTS["rms_norm"] == 1e-6


rng = np.random.default_rng(0)
D, H, F = 16, 4, 24
X = rng.normal(size=(2, 5, D))


def _block(norm, qk_norm=False):
    params = ma.init_decoder_block(rng, D, H, F, norm=norm, activation="swiglu", bias=False)
    if qk_norm:  # QK-norm: an RMSNorm inside the attention, whatever the block's norm
        params["self_attention"]["q_norm"] = {"gamma": rng.uniform(0.5, 1.5, D // H)}
        params["self_attention"]["k_norm"] = {"gamma": rng.uniform(0.5, 1.5, D // H)}
    for name in ("self_attention_norm", "feed_forward_norm"):
        params[name] = {key: rng.uniform(0.5, 1.5, D) for key in params[name]}
    return params


@pytest.mark.parametrize("norm_first", [True, False])
@pytest.mark.parametrize("norm", ["layer_norm", "rms_norm"])
def test_a_block_left_at_none_applies_each_norm_with_its_own_default(norm, norm_first):
    # the block written out with each norm given its kind's default: LayerNorm or RMSNorm with
    # DEFAULTS[norm], QK-norm (an RMSNorm) with rms_norm's
    params = _block(norm, qk_norm=True)
    x = X * 1e-3  # small features: 1e-5 and 1e-6 inside the square root differ visibly
    config = dict(n_heads=H, norm=norm, norm_first=norm_first, activation="swiglu")
    # a block's eps given reaches QK-norm too: there rms_norm's, written out apart
    qk_norm_own = lambda p, h, m, **c: ma.self_attention(p, h, m, **{**c, "eps": 1e-6})  # noqa
    expected = ma.decoder_block(params, x, attention=qk_norm_own, **config, eps=DEFAULTS[norm])
    np.testing.assert_allclose(ma.decoder_block(params, x, **config), expected, rtol=0, atol=1e-12)
    other = ma.decoder_block(params, x, **dict(config, eps=10 * DEFAULTS[norm]))
    assert np.abs(other - expected).max() > 1e-9  # the eps is seen in the output


@pytest.mark.parametrize("norm", ["layer_norm", "rms_norm"])
def test_a_model_left_at_none_applies_its_norms_defaults_final_norm_included(norm):
    params, config = ma.init_causal_lm(rng, vocab_size=11, n_layers=2, d_model=D, n_heads=H,
                                       d_ff=F, position="rope", norm=norm, activation="swiglu",
                                       bias=False)
    params = {**params, "token_embedding": params["token_embedding"] * 1e-2}
    tokens = np.array([[1, 2, 3, 4]])
    np.testing.assert_allclose(ma.causal_lm(params, tokens, **config),
                               ma.causal_lm(params, tokens, eps=DEFAULTS[norm], **config),
                               rtol=0, atol=1e-12)
