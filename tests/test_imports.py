import subprocess
import sys


def test_core_import_pulls_in_no_optional_dependency():
    # The core must stay light: torch, plotting, scipy (GELU only), tqdm (the tour only) and the
    # pretrained stack load only when a function that needs them is called.
    code = ("import sys, minattn; heavy = {'torch', 'matplotlib', 'scipy', 'tqdm', 'safetensors',"
            " 'tokenizers', 'sentence_transformers', 'cupy'}; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in heavy))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"
