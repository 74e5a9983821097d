"""The conformance suite: every cell (row x dtype) of the table against PyTorch, on the CPU, and
the float16, bfloat16, float32 and int64 cells of the core rows on CUDA (Numba's simulator here; ``full``; the
areas' own test modules run their ops on CUDA). A cell passes when zgrad's result
has PyTorch's values, dtype, shape and device, or when both refuse the input with the same kind
of exception; float64 cells of differentiable rows also compare gradients.
"""

from __future__ import annotations

import pytest

import zgrad
from conformance_cells import run_cell, torch
from conformance_table import CPU_DEPENDENT_GAPS, KNOWN_GAPS, ROW_MODULES, TESTED_DTYPES, cells, rows
from cuda_helpers import requires_cuda


def _params(dtypes: tuple[str, ...], device: str, modules: tuple[str, ...] = ROW_MODULES) -> list:
    if torch is None:  # one skipped case instead of thousands (collecting them costs the test run ~20 s)
        return [pytest.param(None, None, id="torch-not-installed", marks=pytest.mark.skip(reason="torch is not installed"))]
    params = []
    for row, dtype in cells(dtypes, device, modules):
        gap = KNOWN_GAPS.get((row.id, dtype))
        strict = (row.id, dtype) not in CPU_DEPENDENT_GAPS
        marks = (pytest.mark.xfail(reason=gap, strict=strict),) if gap else ()
        params.append(pytest.param(row, dtype, id=f"{row.id}-{dtype}", marks=marks))
    return params


@pytest.mark.torch
@pytest.mark.parametrize(("row", "dtype"), _params(TESTED_DTYPES, "cpu"))
def test_cell_matches_torch(row, dtype):
    verdict = run_cell(row, dtype)
    assert verdict.passed, f"{row.id} [{dtype}]: {verdict.detail}"


@pytest.mark.torch
@requires_cuda
@pytest.mark.full
@pytest.mark.parametrize(("row", "dtype"), _params(("float16", "bfloat16", "float32", "int64"), "cuda", ("rows_core",)))
def test_cell_matches_torch_on_cuda(row, dtype):
    verdict = run_cell(row, dtype, device="cuda")
    assert verdict.passed, f"{row.id} [{dtype}, cuda]: {verdict.detail}"


def test_every_op_of_the_table_exists_in_zgrad():
    missing = []
    for row in rows():
        target = zgrad.Tensor if row.op.startswith("Tensor.") else zgrad
        for part in row.op.removeprefix("Tensor.").split("."):
            target = getattr(target, part, None)
        if not callable(target):
            missing.append(row.op)
    assert not missing, f"the conformance table names ops zgrad lacks: {sorted(set(missing))}"


def test_known_gaps_name_cells_of_the_table():
    ids = {(row.id, dtype) for row in rows() for dtype in row.dtypes}
    assert set(KNOWN_GAPS) <= ids, sorted(set(KNOWN_GAPS) - ids)
