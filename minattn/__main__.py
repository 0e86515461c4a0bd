"""`python -m minattn`: the guided tour (see minattn/cli/)."""
import sys

from .cli import main

sys.exit(main())
