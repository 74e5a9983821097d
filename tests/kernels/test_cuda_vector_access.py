"""The flat element-wise kernels' accesses of four elements at once (``kernels/vectors.py``).

The code generators behind ``fits4``/``load4``/``store4`` are plain LLVM builders; here they
run compiled for the CPU (the CUDA ones compile without a GPU but cannot run; the PTX check shows
them as ``ld.global.v4.f32``). The kernels' two paths, by groups of four where every contiguous
array starts on a 4-element boundary and one element at a time otherwise, run in the simulator through its
stand-ins, at sizes that leave every remainder and make threads take one or two groups a trip.
"""

from __future__ import annotations

import numpy as np
import pytest
from cuda_helpers import SIMULATOR, requires_cuda

numba = pytest.importorskip("numba")

DTYPES = [np.float32, np.float64, np.int8, np.int64, np.bool_, np.uint16]


def _aligned(values: np.ndarray) -> np.ndarray:
    """A copy of 1-D ``values`` whose first element lies on a 16-byte boundary."""
    raw = np.zeros(values.nbytes + 16, np.uint8)
    start = -raw.ctypes.data % 16
    out = raw[start:start + values.nbytes].view(values.dtype)
    out[:] = values
    return out


@pytest.fixture(scope="module")
def cpu_accesses():
    from zgrad.kernels.cuda.kernels.vectors import cpu_intrinsics

    fits4, load4, store4 = cpu_intrinsics()

    @numba.njit
    def reverse_group(x, i, out, j):
        """out[j:j + 4] = x[i:i + 4] reversed, by load4 and store4 (where both fit4 there)."""
        a, b, c, d = load4(x, i)
        store4(out, j, d, c, b, a)

    return numba.njit(lambda x: fits4(x)), reverse_group


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_the_access_builders_move_four_elements_of_aligned_arrays(cpu_accesses, dtype):
    fits4, reverse_group = cpu_accesses
    x = _aligned((np.arange(12) % 5).astype(dtype))
    out = _aligned(np.zeros(12, dtype))
    assert fits4(x) and fits4(out)
    reverse_group(x, 4, out, 8)
    np.testing.assert_array_equal(out, np.r_[np.zeros(8), x[4:8][::-1]].astype(dtype))
    assert not fits4(x[1:]), "a view starting mid-vector"
    assert fits4(x[4:])
    assert fits4(x[::2]) and fits4(np.broadcast_to(x[1:2], (8,))), "strided views are read element by element"


@pytest.mark.parametrize("dtype", [np.float32, np.complex64, np.int64])
def test_strided_and_complex_arrays_are_accessed_element_by_element(cpu_accesses, dtype):
    fits4, reverse_group = cpu_accesses
    x = (np.arange(16) * 3).astype(dtype)
    out = np.zeros(16, dtype)
    reverse_group(x[::2], 1, out[1::3], 0)
    expected = np.zeros(16, dtype)
    expected[1::3][:4] = x[::2][1:5][::-1]
    np.testing.assert_array_equal(out, expected)
    if dtype == np.complex64:  # element accesses: valid from any element
        reverse_group(x[1:], 1, out[3:], 0)
        np.testing.assert_array_equal(out[3:7], x[2:6][::-1])
        assert fits4(x[1:])


@requires_cuda
@pytest.mark.parametrize("n", [1, 3, 4, 7, 64, 65, 66, 67, 100, 131, 200])
def test_flat_kernels_agree_by_groups_of_four_and_one_at_a_time(n, monkeypatch):
    """Operands starting on a 4-element boundary take the groups (their loads counted: every
    group once), views starting one element in do not; both give numpy's results, in place too.
    The simulator's 16 threads take two groups a trip for some sizes' first groups and one for
    the rest (100 elements: 25 groups)."""
    import zgrad
    from zgrad.kernels.cuda import kernels

    loads = []
    if SIMULATOR:  # on a GPU the kernels are compiled: only their results are checked there
        load4 = kernels.elementwise.load4
        monkeypatch.setattr(kernels.elementwise, "load4", lambda a, i: loads.append(i) or load4(a, i))
    rng = np.random.default_rng(n)
    a, b = rng.standard_normal(n + 1).astype(np.float32), rng.standard_normal(n + 1).astype(np.float32)
    da, db = zgrad.tensor(a, device="cuda"), zgrad.tensor(b, device="cuda")
    cases = [(lambda x, y: x * 2, lambda x, y: x * 2, 2), (lambda x, y: x - y, lambda x, y: x - y, 2),
             (lambda x, y: zgrad.relu(x), lambda x, y: np.maximum(x, 0), 1),
             (lambda x, y: zgrad.where(x > 0, x, y), lambda x, y: np.where(x > 0, x, y), 3)]
    groups = n // 4
    for offset in (0, 1):
        x, y = da[offset:offset + n], db[offset:offset + n]
        ex, ey = a[offset:offset + n], b[offset:offset + n]
        for op, expected, operands in cases:
            loads.clear()
            result = op(x, y)
            np.testing.assert_allclose(result.cpu().numpy(), expected(ex, ey), rtol=1e-6)
            if op is cases[-1][0] or not SIMULATOR:  # where's condition is a comparison's own launch
                continue
            assert len(loads) == (0 if offset else operands * groups)
            assert sorted(set(loads)) == ([] if offset else list(range(0, 4 * groups, 4)))
    if groups and SIMULATOR:
        loads.clear()
        zgrad.where(da[:n] > 0, da[:n], db[:n])
        assert len(loads) == 5 * groups, "the comparison: 2 loads a group, where: 3"
    inplace = zgrad.tensor(a[:n], device="cuda")
    inplace.mul_(3).add_(inplace)
    np.testing.assert_allclose(inplace.cpu().numpy(), a[:n] * 6, rtol=1e-6)


@requires_cuda
@pytest.mark.parametrize("op", ["sum", "nansum", "prod"])
@pytest.mark.parametrize("shape", [(3, 40), (2, 100), (4, 12), (2, 7)])
def test_row_reductions_agree_by_groups_of_four_and_one_at_a_time(op, shape, monkeypatch):
    """Rows whose length is a multiple of 4, in an array starting on the boundary, are read by
    groups (counted; the simulator's 8 threads a block take two groups a trip for rows of 40 and
    100); rows of another length, or in a view starting one element in, one element at a time."""
    import zgrad
    from zgrad.kernels.cuda import kernels

    loads = []
    if SIMULATOR:
        load4 = kernels.rows.load4
        monkeypatch.setattr(kernels.rows, "load4", lambda a, i: loads.append(i) or load4(a, i))
    rows, n = shape
    values = np.random.default_rng(n).uniform(0.5, 1.5, rows * n + 1)
    values[5] = np.nan
    data = zgrad.tensor(values, device="cuda")
    for offset in (0, 1):
        loads.clear()
        x = data[offset:offset + rows * n].reshape(rows, n)
        expected = getattr(np, op)(values[offset:offset + rows * n].reshape(rows, n), axis=1)
        np.testing.assert_allclose(getattr(zgrad, op)(x, dim=1).cpu().numpy(), expected, rtol=1e-12)
        if SIMULATOR:
            assert len(loads) == (0 if offset or n % 4 else rows * n // 4)
