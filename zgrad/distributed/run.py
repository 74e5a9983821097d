"""``python -m zgrad.distributed.run``: torchrun's launcher for zgrad (also the ``zgrad-run`` command).

A front end only: the agent, its rendezvous and restarts live in :mod:`zgrad.launch`.
"""

from __future__ import annotations

import sys

from zgrad.launch.run_cli import get_args_parser, main

__all__ = ["get_args_parser", "main"]

if __name__ == "__main__":
    sys.exit(main())
