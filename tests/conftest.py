from __future__ import annotations

import os
import sys

# helpers.py sits beside the tests; subprocesses started by tests import it from here too.
sys.path.insert(0, os.path.dirname(__file__))
