"""The ops of issue 32 on the CUDA backend (Numba's simulator here) against the CPU backend, under
the strict device check: each is composed of ops with CUDA kernels (no kernel of its own), so
this checks that the composition stays on the device, forward and backward."""

from __future__ import annotations

import numpy as np
import pytest

import zgrad
from cuda_helpers import check_device, requires_cuda, strict_cuda

pytestmark = requires_cuda


def _index(lib, values):
    return lib.tensor(values, dtype=lib.int64)


CASES = {
    "diff": (lambda lib, a, b: lib.diff(a, n=2, dim=0, append=b), [(4, 3), (2, 3)]),
    "trapezoid": (lambda lib, a: lib.trapezoid(a, dx=0.5), [(3, 5)]),
    "trapezoid_x": (lambda lib, a, x: lib.trapezoid(a, x.detach().cumsum(0)), [(3, 5), (5,)]),
    "cumulative_trapezoid": (lambda lib, a: lib.cumulative_trapezoid(a, dim=0), [(4, 3)]),
    "vander": (lambda lib, a: lib.vander(a, 4), [(3,)]),
    "cov": (lambda lib, a, w: lib.cov(a, aweights=w.detach().abs() + 0.1), [(3, 6), (6,)]),
    "corrcoef": (lambda lib, a: lib.corrcoef(a), [(3, 6)]),
    "dist": (lambda lib, a, b: lib.dist(a, b, 3), [(3, 4), (4,)]),
    "renorm": (lambda lib, a: lib.renorm(a, 2, 1, 1.0), [(3, 4)]),
    "matrix_exp": (lambda lib, a: lib.matrix_exp(a * 3), [(2, 3, 3)]),
    "matrix_power": (lambda lib, a: lib.matrix_power(a, 3), [(3, 3)]),
    "put": (lambda lib, a, s: a.put(_index(lib, [0, -1, 5, 5]), s, accumulate=True), [(3, 4), (4,)]),
    "index_reduce": (lambda lib, a, s: a.index_reduce(0, _index(lib, [0, 2, 0]), s, "amax"), [(3, 4), (3, 4)]),
    "fill_diagonal_": (lambda lib, a: (a * 1).fill_diagonal_(2.5, wrap=True), [(7, 2)]),
    "sum_to_size": (lambda lib, a: a.sum_to_size(3, 1), [(2, 3, 4)]),
    "fill": (lambda lib, a, v: lib.fill(a, v.sum()), [(2, 3), (2,)]),
}


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_matches_cpu(case):
    fn, shapes = case
    check_device(fn, shapes, dtype=np.float64)


def test_integer_results_stay_on_the_device():
    data = np.array([[3, 1, 4], [1, 5, 9]])
    expected = {
        "isin": np.isin(data, [1, 9, 7]),
        "unravel": np.stack(np.unravel_index(data.reshape(-1), (3, 4))),
        "eq_": (data == 1).astype(np.int64),
    }
    with strict_cuda():
        x = zgrad.tensor(data)
        got = {
            "isin": zgrad.isin(x, zgrad.tensor([1, 9, 7])),
            "unravel": zgrad.stack(zgrad.unravel_index(x.reshape(-1), (3, 4))),
            "eq_": x.clone().eq_(1),
        }
        assert all(t.is_cuda for t in got.values())
    for name, tensor in got.items():
        np.testing.assert_array_equal(tensor.cpu().numpy(), expected[name], err_msg=name)


def test_windows_and_histogram_on_cuda():
    window = zgrad.hann_window(8, device="cuda", dtype=zgrad.float64)
    assert window.is_cuda
    np.testing.assert_allclose(window.cpu().numpy(), zgrad.hann_window(8, dtype=zgrad.float64).numpy())
    hist, edges = zgrad.histogram(zgrad.tensor([1.0, 2.0, 2.5, 4.0]).cuda(), 3)
    assert hist.is_cuda and hist.tolist() == [1.0, 2.0, 1.0] and edges.tolist() == [1.0, 2.0, 3.0, 4.0]
