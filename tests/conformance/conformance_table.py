"""The conformance table: the rows of every ``rows_*.py`` module in this directory (one per area
of the API), and the cells (row x dtype) the tests run.

The tests run every dtype of the grid (``python -m tests.conformance --table`` prints it), float16
and bfloat16 included.
"""

from __future__ import annotations

import importlib
from dataclasses import replace
from pathlib import Path

from row import ALL_DTYPES, Row, T

__all__ = ["KNOWN_GAPS", "TESTED_DTYPES", "rows", "cells"]

TESTED_DTYPES = ALL_DTYPES
# Cells where zgrad is known to differ from PyTorch, and why: the tests expect them to fail
# (strictly: a gap that closes fails its test until it is taken off this list).
KNOWN_GAPS: dict[tuple[str, str], str] = {
    ("pow-scalar", "bool"): "a bool tensor to a Python bool power stays bool in torch; zgrad refuses pow on bool",
    ("clamp-tensor_bounds", "bool"): "torch refuses clamp of a bool tensor between two tensor bounds only; zgrad "
                                     "clamps it",
    ("pow-number", "bool"): "a bool tensor to a Python bool power stays bool in torch; zgrad refuses pow on bool",
    **{(row, dtype): "torch's i0 and i1 are NaN at +-inf; zgrad gives the limits, inf and +-inf"
       for row in ("i0-edges", "special.i1-edges") for dtype in ("float16", "bfloat16", "float32", "float64")},
    **{("special.modified_bessel_i1-edges", dtype): "torch's modified_bessel_i1 is NaN at +-inf; zgrad gives the "
                                                     "limits, +-inf" for dtype in ("float32", "float64")},
    **{("special.zeta-edges", dtype): "torch's zeta(s, q) is NaN at q = inf; zgrad gives the limit, 0"
       for dtype in ("float32", "float64")},
    **{("polygamma-n1-edges", dtype): "at 0 and the negative integers (poles) zgrad's trigamma is inf; torch's "
                                       "is a large finite number left by the rounding of sin(pi x)"
       for dtype in ("int8", "int16", "int32", "int64", "bfloat16", "float32", "float64")},
    **{("polygamma-n2-edges", dtype): "torch's polygamma(n >= 2) (through zeta) is NaN at +inf; zgrad gives the "
                                       "limit, -0"
       for dtype in ("float16", "bfloat16", "float32", "float64")},
    ("isclose-broadcast-tolerances", "bool"): "torch takes |a - b| in bool arithmetic; zgrad in the default float",
    ("isclose-broadcast-tolerances", "uint8"): "torch takes |a - b| in wrapping uint8 arithmetic; zgrad does not wrap",
    ("Tensor.allclose-atol", "bool"): "as isclose: torch's |a - b| in bool arithmetic",
    ("Tensor.allclose-atol", "uint8"): "as isclose: torch's |a - b| wraps in uint8",
    ("logdet", "float64"): "where the determinant is negative (logdet NaN) torch's gradient is 0, zgrad's inv(A)^T",
    ("cholesky_solve", "float64"): "torch's gradient for the factor is the full (symmetrized) matrix; zgrad's "
                                   "follows the triangle the solve reads",
    ("addr", "bool"): "torch keeps bool for addr of bool tensors; zgrad gives int64",
    ("nn.functional.conv_transpose2d", "float16"): "torch rounds the transposed convolution to float16 before it "
                                                   "adds the bias; zgrad rounds once (its error to float64 is no "
                                                   "larger than torch's)",
    ("nn.functional.conv_transpose2d", "bfloat16"): "torch rounds the transposed convolution to bfloat16 before it "
                                                    "adds the bias; zgrad rounds once (its error to float64 is "
                                                    "smaller than torch's)",
}

# Gaps that show only on some CPUs: torch's half-precision convolutions round once (as zgrad) where
# oneDNN has native float16/bfloat16 kernels for the CPU, twice elsewhere.
CPU_DEPENDENT_GAPS = {("nn.functional.conv_transpose2d", "float16"), ("nn.functional.conv_transpose2d", "bfloat16")}

ROW_MODULES = tuple(sorted(p.stem for p in Path(__file__).resolve().parent.glob("rows_*.py")))


def rows(modules: tuple[str, ...] = ROW_MODULES) -> list[Row]:
    """Every row of ``modules`` (by default the whole table), in module order; a row whose id an
    earlier module already used is told apart by its module's area in its name ("abs" of rows_math
    becomes "abs-math")."""
    found: list[Row] = []
    seen: set[str] = set()
    for module in ROW_MODULES:
        for row in importlib.import_module(module).ROWS:
            if row.id in seen:
                area = module.removeprefix("rows_")
                row = replace(row, name=f"{row.name}-{area}" if row.name else area)
                if row.id in seen:
                    raise ValueError(f"{module}: two conformance rows have the id {row.id!r}: give one a name=")
            seen.add(row.id)
            if module in modules:
                found.append(row)
    return found


def cells(dtypes: tuple[str, ...] = ALL_DTYPES, device: str = "cpu",
          modules: tuple[str, ...] = ROW_MODULES) -> list[tuple[Row, str]]:
    """(row, dtype) for every row of ``modules`` and each of its dtypes among ``dtypes``; on a device
    other than the CPU only rows with a tensor argument (creation rows make CPU tensors)."""
    chosen = []
    for row in rows(modules):
        if device != "cpu" and not any(isinstance(a, T) for a in (*row.args, *row.kwargs.values())):
            continue
        chosen.extend((row, dtype) for dtype in row.dtypes if dtype in dtypes)
    return chosen
