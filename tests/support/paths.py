"""Where things are, for tests and their helper scripts: the repository, the test tree, this
helper directory (what a child process needs on its PYTHONPATH to import the helpers)."""

from __future__ import annotations

from pathlib import Path

SUPPORT = Path(__file__).resolve().parent
TESTS = SUPPORT.parent
REPO = TESTS.parent
PACKAGE = REPO / "zgrad"
CONFIGS = REPO / "configs"
