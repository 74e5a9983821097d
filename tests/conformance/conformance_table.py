"""The conformance table: the rows of every ``rows_*.py`` module in this directory (one per area
of the API), and the cells (row x dtype) the tests run.

The tests run the dtypes zgrad's kernels compute in today; the table printed by
``python -m tests.conformance --table`` shows every dtype of the grid, float16 and bfloat16
included.
"""

from __future__ import annotations

import importlib
from pathlib import Path

from row import ALL_DTYPES, Row, T

__all__ = ["KNOWN_GAPS", "TESTED_DTYPES", "rows", "cells"]

TESTED_DTYPES = ("bool", "uint8", "int8", "int16", "int32", "int64", "float32", "float64")
# Cells where zgrad is known to differ from PyTorch, and why: the tests expect them to fail
# (strictly: a gap that closes fails its test until it is taken off this list).
KNOWN_GAPS: dict[tuple[str, str], str] = {
    ("pow-scalar", "bool"): "a bool tensor to a Python bool power stays bool in torch; zgrad refuses pow on bool",
    ("clamp-tensor_bounds", "bool"): "torch refuses clamp of a bool tensor between two tensor bounds only; zgrad "
                                     "clamps it",
}

ROW_MODULES = tuple(sorted(p.stem for p in Path(__file__).resolve().parent.glob("rows_*.py")))


def rows() -> list[Row]:
    """Every row of the table, in module order.

    Raises:
        ValueError: two rows share an id (give one a ``name``).
    """
    found: list[Row] = []
    for name in ROW_MODULES:
        found.extend(importlib.import_module(name).ROWS)
    seen: set[str] = set()
    for row in found:
        if row.id in seen:
            raise ValueError(f"two conformance rows have the id {row.id!r}: give one a name=")
        seen.add(row.id)
    return found


def cells(dtypes: tuple[str, ...] = ALL_DTYPES, device: str = "cpu") -> list[tuple[Row, str]]:
    """(row, dtype) for every row and each of its dtypes among ``dtypes``; on a device other than
    the CPU only rows with a tensor argument (creation rows make CPU tensors)."""
    chosen = []
    for row in rows():
        if device != "cpu" and not any(isinstance(a, T) for a in (*row.args, *row.kwargs.values())):
            continue
        chosen.extend((row, dtype) for dtype in row.dtypes if dtype in dtypes)
    return chosen
