"""`minattn.interop` is minattn/models/interop.py, under the name users' code imports."""
import sys

from .models import interop

sys.modules[__name__] = interop  # the same module object: its private names and patches included
