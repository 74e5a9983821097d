"""The conformance suite: every cell (row x dtype) of the table against PyTorch, on the CPU, and
the float32 cells on CUDA (Numba's simulator here; ``full``). A cell passes when zgrad's result
has PyTorch's values, dtype, shape and device, or when both refuse the input with the same kind
of exception; float64 cells of differentiable rows also compare gradients.
"""

from __future__ import annotations

import pytest

from conformance_cells import run_cell, torch, zgrad_has_dtype
from conformance_table import KNOWN_GAPS, TESTED_DTYPES, cells
from cuda_helpers import requires_cuda

pytestmark = [pytest.mark.torch, pytest.mark.skipif(torch is None, reason="torch is not installed")]


def _params(dtypes: tuple[str, ...], device: str) -> list:
    params = []
    for row, dtype in cells(dtypes, device):
        gap = KNOWN_GAPS.get((row.id, dtype))
        marks = (pytest.mark.xfail(reason=gap, strict=True),) if gap else ()
        params.append(pytest.param(row, dtype, id=f"{row.id}-{dtype}", marks=marks))
    return params


@pytest.mark.parametrize(("row", "dtype"), _params(TESTED_DTYPES, "cpu"))
def test_cell_matches_torch(row, dtype):
    verdict = run_cell(row, dtype)
    assert verdict.passed, f"{row.id} [{dtype}]: {verdict.detail}"


@requires_cuda
@pytest.mark.full
@pytest.mark.parametrize(("row", "dtype"), _params(("float32",), "cuda"))
def test_cell_matches_torch_on_cuda(row, dtype):
    verdict = run_cell(row, dtype, device="cuda")
    assert verdict.passed, f"{row.id} [{dtype}, cuda]: {verdict.detail}"


def test_every_tested_dtype_exists_in_zgrad():
    assert all(zgrad_has_dtype(d) for d in TESTED_DTYPES)
