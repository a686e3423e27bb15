"""`python -m trajcore`: see `trajcore.cli`."""

import sys

from trajcore.cli import main

sys.exit(main())
