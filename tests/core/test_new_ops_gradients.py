"""The gradients of this project's newer ops against central finite differences (float64), and
the same ops on the CUDA backend against the CPU's (Numba's simulator here): sparse products,
sums and softmax, the 1-D convolutions and poolings, and the piecewise and composed activations
and margin and likelihood losses."""

from __future__ import annotations

import numpy as np
import pytest

from cuda_helpers import check_device, requires_cuda
from helpers import check_finite_differences

INDICES = [[0, 2, 1, 0], [1, 0, 2, 1]]


def sparse(lib, values):
    return lib.sparse_coo_tensor(INDICES, values, (3, 3))


CASES = {
    "sparse.mm": (lambda lib, v, d: lib.sparse.mm(sparse(lib, v), d), [(4,), (3, 2)]),
    "dense @ sparse": (lambda lib, v, d: d @ sparse(lib, v), [(4,), (2, 3)]),
    "sparse to_dense": (lambda lib, v: sparse(lib, v).to_dense() * 1.5, [(4,)]),
    "sparse.softmax": (lambda lib, v: lib.sparse.softmax(sparse(lib, v), 1).to_dense(), [(4,)]),
    "sparse.sum": (lambda lib, v: lib.sparse.sum(sparse(lib, v), 0).to_dense(), [(4,)]),
    "conv1d": (lambda lib, x, w, b: lib.nn.functional.conv1d(x, w, b, stride=2, padding=1, groups=2),
               [(2, 4, 7), (6, 2, 3), (6,)]),
    "conv_transpose1d": (lambda lib, x, w: lib.nn.functional.conv_transpose1d(x, w, stride=2, output_padding=1),
                         [(2, 3, 5), (3, 2, 3)]),
    "max_pool1d": (lambda lib, x: lib.nn.functional.max_pool1d(x, 3, 2, 1), [(2, 3, 8)]),
    "avg_pool1d": (lambda lib, x: lib.nn.functional.avg_pool1d(x, 3, 2, 1, count_include_pad=False), [(2, 3, 8)]),
    "adaptive_avg_pool1d": (lambda lib, x: lib.nn.functional.adaptive_avg_pool1d(x, 3), [(2, 3, 8)]),
}
for _name in ("relu6", "hardtanh", "hardsigmoid", "hardswish", "selu", "celu", "logsigmoid", "softsign", "tanhshrink",
              "softshrink", "hardshrink"):
    CASES[_name] = ((lambda name: lambda lib, x: getattr(lib.nn.functional, name)(x * 4))(_name), [(3, 5)])
CASES.update({
    "glu": (lambda lib, x: lib.nn.functional.glu(x, 1), [(3, 4)]),
    "softmin": (lambda lib, x: lib.nn.functional.softmin(x, 1), [(3, 4)]),
    "threshold": (lambda lib, x: lib.nn.functional.threshold(x, 0.1, 20.0), [(3, 5)]),
    "cosine_embedding_loss": (lambda lib, a, b: lib.nn.functional.cosine_embedding_loss(
        a, b, lib.tensor([1, -1, 1]), margin=-0.5), [(3, 4), (3, 4)]),
    "margin_ranking_loss": (lambda lib, a, b: lib.nn.functional.margin_ranking_loss(
        a, b, lib.tensor([1.0, -1.0, 1.0], dtype=a.dtype), margin=0.1), [(3,), (3,)]),
    "triplet_margin_loss": (lambda lib, a, p, n: lib.nn.functional.triplet_margin_loss(a, p, n, margin=3.0, swap=True),
                            [(3, 4), (3, 4), (3, 4)]),
    "soft_margin_loss": (lambda lib, x: lib.nn.functional.soft_margin_loss(
        x, lib.tensor([[1.0, -1.0], [-1.0, 1.0]], dtype=x.dtype)), [(2, 2)]),
    "multilabel_soft_margin_loss": (lambda lib, x: lib.nn.functional.multilabel_soft_margin_loss(
        x, lib.tensor([[1.0, 0.0, 1.0]], dtype=x.dtype)), [(1, 3)]),
    "poisson_nll_loss": (lambda lib, x, t: lib.nn.functional.poisson_nll_loss(x, t.abs()), [(2, 3), (2, 3)]),
    "gaussian_nll_loss": (lambda lib, x, t, v: lib.nn.functional.gaussian_nll_loss(x, t, v.abs() + 0.5),
                          [(2, 3), (2, 3), (2, 3)]),
})


@pytest.mark.parametrize("case", CASES)
def test_gradients_match_finite_differences(case):
    fn, shapes = CASES[case]
    check_finite_differences(fn, shapes, seed=1)


@requires_cuda
@pytest.mark.parametrize("case", [c for c in CASES if not c.startswith("sparse") and c != "dense @ sparse"])
def test_the_op_runs_on_cuda_as_on_the_cpu(case):
    fn, shapes = CASES[case]
    check_device(fn, shapes, dtype=np.float64, seed=1)
