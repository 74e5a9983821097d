"""The README's API table lists what the public modules export."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parent.parent / "README.md"


def api_row(module: str) -> str:
    """The text of the API table's row for ``module``."""
    for line in README.read_text(encoding="utf-8").splitlines():
        if line.startswith(f"| `{module}` |"):
            return line
    raise AssertionError(f"README.md's API table has no row for {module}")


@pytest.mark.parametrize("module", ["zgrad.nn", "zgrad.nn.functional", "zgrad.distributions"])
def test_api_table_lists_every_export(module):
    row = api_row(module)
    listed = set(re.findall(r"`(\w+)", row))
    exported = {name for name in importlib.import_module(module).__all__ if name not in ("functional", "init")}
    assert not exported - listed, f"README.md's {module} row misses {sorted(exported - listed)}"
