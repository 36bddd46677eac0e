"""``python -m icl_lib``: the command line (:mod:`icl_lib.tools.cli`)."""

import sys

from .tools.cli import main

if __name__ == "__main__":
    sys.exit(main())
