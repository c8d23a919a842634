"""``python -m arkvory_sched.demo``: the same as the ``arkvory-demo`` command."""

from __future__ import annotations

import sys

from ._cli import main

if __name__ == "__main__":
    sys.exit(main())
