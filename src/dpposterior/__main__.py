"""``python -m dpposterior``: the same command line as ``dpposterior``."""

import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main())
