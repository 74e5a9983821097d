"""The linear algebra on the CUDA backend (Numba's simulator here): the products, contractions and
norms run on CUDA kernels (output and gradients compared with the CPU backend, under a strict
device check), and the factorizations and solves, which are CPU only, raise an error that names
the op and the fix.

By default a representative subset of the cases runs; the others carry the ``full`` marker.
"""

from __future__ import annotations

import pytest

import test_linalg_norms
import test_linalg_products
import zgrad
from cuda_helpers import check_device, requires_cuda, strict_cuda

pytestmark = requires_cuda

# Norms computed from singular values (nuclear, 2, -2) need an SVD: CPU only.
_SVD_NORMS = {"matrix_norm-nuc", "matrix_norm-2", "matrix_norm--2", "matrix_norm-dims-keepdim", "linalg.norm-matrix",
              "norm-nuc"}
SUBSET = {"mm", "addmm", "cdist", "cross-broadcast", "kron", "einsum bhqd,bhkd->bhqk", "einsum ii->i",
          "vector_norm-2", "vector_norm-inf", "vector_norm-dims", "matrix_norm-1"}


def _cases():
    params = [*test_linalg_products.PRODUCTS, *test_linalg_products.EINSUM_CASES,
              *(p for p in test_linalg_norms.CASES if p.values[0].name not in _SVD_NORMS)]
    for p in params:
        c = p.values[0]
        yield pytest.param(c, id=c.name, marks=() if c.name in SUBSET else (pytest.mark.full,))


@pytest.mark.parametrize("c", list(_cases()))
def test_on_cuda_as_on_cpu(c):
    check_device(c.fn, c.shapes, domain=c.domain)


CPU_ONLY = [
    ("linalg.inv", lambda a: zgrad.linalg.inv(a)),
    ("linalg.det", lambda a: zgrad.linalg.det(a)),
    ("linalg.slogdet", lambda a: zgrad.linalg.slogdet(a)),
    ("linalg.solve", lambda a: zgrad.linalg.solve(a, a)),
    ("linalg.cholesky", lambda a: zgrad.linalg.cholesky(a)),
    ("linalg.qr", lambda a: zgrad.linalg.qr(a)),
    ("linalg.svd", lambda a: zgrad.linalg.svd(a)),
    ("linalg.svd", lambda a: zgrad.linalg.pinv(a)),
    ("linalg.eigh", lambda a: zgrad.linalg.eigh(a)),
]


@pytest.mark.parametrize("op, fn", CPU_ONLY, ids=[f"{op}-{i}" for i, (op, _) in enumerate(CPU_ONLY)])
def test_factorizations_name_the_fix_on_cuda(op, fn):
    with strict_cuda():
        a = zgrad.ones(2, 2)
        with pytest.raises(zgrad.ZgradError) as info:
            fn(a)
    message = str(info.value)
    assert message.startswith(f"{op} runs on the CPU only") and ".cpu()" in message
