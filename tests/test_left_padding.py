"""padding_mask(lengths, n, side="left"): the mask of a left-padded batch, as transformers pads
prompts for generation (padding_side="left"), held to transformers itself: its tokenizer's
attention_mask, and a SmolLM-like Llama model's logits at the real tokens of a left-padded batch
against minattn's blocks under causal_mask & padding_mask(side="left")."""
import numpy as np
import pytest

import minattn as ma

torch = pytest.importorskip("torch", reason="compares with transformers")
transformers = pytest.importorskip("transformers", reason="compares with transformers")
tokenizers = pytest.importorskip("tokenizers", reason="builds a tokenizer to pad with")

from minattn.interop import from_hf  # noqa: E402
from .test_hf_families import _build  # noqa: E402

LENGTHS = [6, 3, 1, 0]


def _tokenizer(side):
    vocab = {"[PAD]": 0, **{f"w{i}": i for i in range(1, 10)}}
    model = tokenizers.Tokenizer(tokenizers.models.WordLevel(vocab, unk_token="[PAD]"))
    model.pre_tokenizer = tokenizers.pre_tokenizers.Whitespace()
    return transformers.PreTrainedTokenizerFast(tokenizer_object=model, pad_token="[PAD]",
                                                padding_side=side)


@pytest.mark.parametrize("side", ["left", "right"])
def test_padding_mask_is_the_tokenizers_attention_mask(side):
    texts = [" ".join(f"w{1 + i % 9}" for i in range(n)) for n in LENGTHS]
    batch = _tokenizer(side)(texts, padding="max_length", max_length=6)
    expected = np.array(batch["attention_mask"], dtype=bool)
    ours = ma.padding_mask(np.array(LENGTHS), 6, side=side)  # [B, 1, 1, n]
    assert ours.shape == (4, 1, 1, 6)
    np.testing.assert_array_equal(ours[:, 0, 0], expected)


def test_a_side_other_than_left_or_right_is_refused_by_name():
    with pytest.raises(ValueError, match=r"side must be 'right' .* or 'left' .*, got 'top'"):
        ma.padding_mask(np.array([2]), 3, side="top")


def test_left_padded_llama_logits_at_the_real_tokens_equal_transformers(float64_islands):
    model = _build("llama", torch.float64)
    params, config = from_hf(model)
    lengths, n = np.array([6, 3, 1]), 6
    keep = ma.padding_mask(lengths, n, side="left")  # [B, 1, 1, n]
    attention_mask = keep[:, 0, 0].astype(np.int64)  # transformers' [B, n], 1 = a real token
    tokens = np.where(keep[:, 0, 0], np.random.default_rng(0).integers(3, 30, (3, n)), 0)
    positions = np.maximum(np.arange(n) - (n - lengths)[:, None], 0)  # a row counts from 0
    with torch.no_grad():
        theirs = model(torch.from_numpy(tokens), attention_mask=torch.from_numpy(attention_mask),
                       position_ids=torch.from_numpy(positions)).logits.numpy()
    blocks = {key: value for key, value in config.items() if key not in ("position", "window")}
    h = ma.decoder({"layers": params["layers"], "final_norm": params["final_norm"]},
                   params["token_embedding"][tokens], ma.causal_mask(n) & keep,
                   norm_first=True, positions=positions, **blocks)
    w, b = ma.language_model.unembedding(params)
    ours = h @ w if b is None else h @ w + b
    real = keep[:, 0, 0]  # a padded position's logits are nobody's prediction
    np.testing.assert_allclose(ours[real], theirs[real], rtol=0, atol=1e-10)
    mirrored = ma.causal_mask(n) & ma.padding_mask(lengths, n)[..., ::-1]  # the README's old way
    np.testing.assert_array_equal(ma.causal_mask(n) & keep, mirrored)
