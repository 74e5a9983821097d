"""Autocast's output dtypes, op by op, against PyTorch's on the CPU: each op of the table runs on
inputs of several dtype combinations inside ``autocast("cpu", dtype)`` in both libraries, and
zgrad must give PyTorch's output dtype (or fail where PyTorch fails)."""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
import pytest

import zgrad
from helpers import torch

pytestmark = pytest.mark.torch

Op = Callable[..., Any]


def _int_target(lib: Any, n: int, classes: int) -> Any:
    return lib.tensor(np.arange(n) % classes)


# name, function of (lib, F, *inputs), input shapes; inputs are drawn in (0.1, 0.9)
OPS: list[tuple[str, Op, tuple[tuple[int, ...], ...]]] = [
    ("linear", lambda L, F, a, w: F.linear(a, w), ((4, 8), (3, 8))),
    ("linear_bias", lambda L, F, a, w, b: F.linear(a, w, b), ((4, 8), (3, 8), (3,))),
    ("matmul", lambda L, F, a, b: L.matmul(a, b), ((4, 8), (8, 3))),
    ("operator_matmul", lambda L, F, a, b: a @ b, ((2, 4, 8), (8, 3))),
    ("mm", lambda L, F, a, b: L.mm(a, b), ((4, 8), (8, 3))),
    ("bmm", lambda L, F, a, b: L.bmm(a, b), ((2, 4, 8), (2, 8, 3))),
    ("baddbmm", lambda L, F, c, a, b: L.baddbmm(c, a, b), ((2, 4, 3), (2, 4, 8), (2, 8, 3))),
    ("addmm", lambda L, F, c, a, b: L.addmm(c, a, b), ((4, 3), (4, 8), (8, 3))),
    ("addbmm", lambda L, F, c, a, b: L.addbmm(c, a, b), ((4, 3), (2, 4, 8), (2, 8, 3))),
    ("addmv", lambda L, F, c, a, b: L.addmv(c, a, b), ((4,), (4, 8), (8,))),
    ("addr", lambda L, F, c, a, b: L.addr(c, a, b), ((4, 3), (4,), (3,))),
    ("mv", lambda L, F, a, b: L.mv(a, b), ((4, 8), (8,))),
    ("dot", lambda L, F, a, b: L.dot(a, b), ((8,), (8,))),
    ("einsum", lambda L, F, a, b: L.einsum("bij,bjk->bik", a, b), ((2, 4, 8), (2, 8, 3))),
    ("tensordot", lambda L, F, a, b: L.tensordot(a, b, dims=1), ((4, 8), (8, 3))),
    ("linalg_vecdot", lambda L, F, a, b: L.linalg.vecdot(a, b), ((4, 8), (4, 8))),
    ("conv2d", lambda L, F, x, w: F.conv2d(x, w), ((1, 2, 5, 5), (3, 2, 3, 3))),
    ("conv_transpose2d", lambda L, F, x, w: F.conv_transpose2d(x, w), ((1, 2, 4, 4), (2, 3, 3, 3))),
    ("prelu", lambda L, F, x, w: F.prelu(x, w), ((2, 3, 4), (3,))),
    ("sdpa", lambda L, F, q, k, v: F.scaled_dot_product_attention(q, k, v), ((1, 2, 4, 8),) * 3),
    ("softmax", lambda L, F, x: F.softmax(x, dim=-1), ((4, 8),)),
    ("log_softmax", lambda L, F, x: F.log_softmax(x, dim=-1), ((4, 8),)),
    ("layer_norm", lambda L, F, x, w, b: F.layer_norm(x, (8,), w, b), ((4, 8), (8,), (8,))),
    ("group_norm", lambda L, F, x: F.group_norm(x, 2), ((2, 4, 3),)),
    ("sum", lambda L, F, x: L.sum(x), ((4, 8),)),
    ("sum_dtype", lambda L, F, x: L.sum(x, dtype=L.float64), ((4, 8),)),
    ("mean", lambda L, F, x: x.mean(), ((4, 8),)),
    ("prod", lambda L, F, x: L.prod(x, 1), ((4, 3),)),
    ("cumsum", lambda L, F, x: L.cumsum(x, 0), ((4, 8),)),
    ("exp", lambda L, F, x: L.exp(x), ((4, 8),)),
    ("log", lambda L, F, x: L.log(x), ((4, 8),)),
    ("pow", lambda L, F, x: L.pow(x, 2), ((4, 8),)),
    ("rsqrt", lambda L, F, x: L.rsqrt(x), ((4, 8),)),
    ("logsumexp", lambda L, F, x: L.logsumexp(x, 1), ((4, 8),)),
    ("add", lambda L, F, a, b: a + b, ((4, 8), (4, 8))),
    ("mul_scalar", lambda L, F, a: a * 2.0, ((4, 8),)),
    ("relu", lambda L, F, a: F.relu(a), ((4, 8),)),
    ("tanh", lambda L, F, a: L.tanh(a), ((4, 8),)),
    ("gelu", lambda L, F, a: F.gelu(a), ((4, 8),)),
    ("mse_loss", lambda L, F, a, b: F.mse_loss(a, b), ((4, 8), (4, 8))),
    ("l1_loss", lambda L, F, a, b: F.l1_loss(a, b), ((4, 8), (4, 8))),
    ("smooth_l1_loss", lambda L, F, a, b: F.smooth_l1_loss(a, b), ((4, 8), (4, 8))),
    ("huber_loss", lambda L, F, a, b: F.huber_loss(a, b), ((4, 8), (4, 8))),
    ("kl_div", lambda L, F, a, b: F.kl_div(a, b, reduction="batchmean"), ((4, 8), (4, 8))),
    ("bce_with_logits", lambda L, F, a, b: F.binary_cross_entropy_with_logits(a, b), ((4, 8), (4, 8))),
    ("binary_cross_entropy", lambda L, F, a, b: F.binary_cross_entropy(a, b), ((4, 8), (4, 8))),
    ("cross_entropy", lambda L, F, a: F.cross_entropy(a, _int_target(L, 4, 8)), ((4, 8),)),
    ("nll_loss", lambda L, F, a: F.nll_loss(a, _int_target(L, 4, 8)), ((4, 8),)),
    ("cat", lambda L, F, a, b: L.cat([a, b]), ((4, 8), (2, 8))),
    ("stack", lambda L, F, a, b: L.stack([a, b]), ((4, 8), (4, 8))),
    ("index_copy", lambda L, F, a, b: a.index_copy(0, L.tensor([0, 2]), b), ((4, 8), (2, 8))),
    ("cdist", lambda L, F, a, b: L.cdist(a, b), ((4, 8), (3, 8))),
    ("cosine_similarity", lambda L, F, a, b: F.cosine_similarity(a, b), ((4, 8), (4, 8))),
    ("trace", lambda L, F, a: L.trace(a), ((4, 4),)),
    ("linalg_inv", lambda L, F, a: L.linalg.inv(a + 4 * L.eye(4, dtype=a.dtype)), ((4, 4),)),
    ("atan2", lambda L, F, a, b: L.atan2(a, b), ((4, 8), (4, 8))),
]

# Input dtype combinations, by numpy name: the first input's dtype, then the others'.
DTYPES = [("float32", "float32"), ("float16", "float16"), ("float64", "float64"), ("float16", "float32"),
          ("float32", "float16")]



def _inputs(shapes: tuple[tuple[int, ...], ...], dtypes: tuple[str, str]) -> list[np.ndarray]:
    rng = np.random.default_rng(0)
    return [rng.uniform(0.1, 0.9, shape).astype(dtypes[0] if i == 0 else dtypes[1]) for i, shape in enumerate(shapes)]


def _torch_outcome(fn: Op, arrays: list[np.ndarray], autocast_dtype: str) -> str:
    F = torch.nn.functional
    inputs = [torch.tensor(a.astype(np.float32)).bfloat16() if a.dtype.name == "bfloat16" else torch.tensor(a)
              for a in arrays]
    try:
        with torch.autocast("cpu", dtype=getattr(torch, autocast_dtype)):
            return str(fn(torch, F, *inputs).dtype).removeprefix("torch.")
    except RuntimeError:
        return "error"


def _zgrad_outcome(fn: Op, arrays: list[np.ndarray], autocast_dtype: str) -> str:
    F = zgrad.nn.functional
    inputs = [zgrad.tensor(a) for a in arrays]
    try:
        with zgrad.autocast("cpu", dtype=getattr(zgrad, autocast_dtype)):
            return fn(zgrad, F, *inputs).dtype.name
    except (RuntimeError, TypeError, ValueError):  # zgrad's DTypeError and ShapeError are among them
        return "error"


@pytest.mark.parametrize("dtypes", DTYPES, ids="-".join)
@pytest.mark.parametrize("name, fn, shapes", OPS, ids=[op[0] for op in OPS])
def test_output_dtype_as_torch_float16(name: str, fn: Op, shapes: tuple, dtypes: tuple[str, str]) -> None:
    arrays = _inputs(shapes, dtypes)
    expected = _torch_outcome(fn, arrays, "float16")
    assert _zgrad_outcome(fn, arrays, "float16") == expected


@pytest.mark.parametrize("dtypes", [("float32", "float32"), ("float64", "float64"), ("bfloat16", "float32"),
                                    ("float16", "float16")], ids="-".join)
@pytest.mark.parametrize("name, fn, shapes", OPS, ids=[op[0] for op in OPS])
def test_output_dtype_as_torch_bfloat16(name: str, fn: Op, shapes: tuple, dtypes: tuple[str, str]) -> None:
    arrays = [a.astype(np.dtype(dtypes[0] if i == 0 else dtypes[1]))
              for i, a in enumerate(_inputs(shapes, ("float32", "float32")))]
    expected = _torch_outcome(fn, arrays, "bfloat16")
    assert _zgrad_outcome(fn, arrays, "bfloat16") == expected
