"""`minattn.pretrained` is minattn/models/pretrained.py, under the name users' code imports."""
import sys

from .models import pretrained

sys.modules[__name__] = pretrained  # the same module object: its private names and patches included
