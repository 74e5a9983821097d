"""float16 and bfloat16 tensors against PyTorch's CPU results: a sweep of ops forward and backward
(each input's gradient in its own dtype), creation with ``dtype=``, float32 accumulation inside
one op, optimizer steps on half parameters, promotion, ``finfo``/``iinfo`` and the conversions."""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
import pytest

import zgrad
from helpers import torch

HALF = ["float16", "bfloat16"]
# (rtol, atol) against torch: one or two roundings of the half dtype apart
TOLERANCE = {"float16": (2e-3, 2e-3), "bfloat16": (1.6e-2, 1e-2)}

def _lib_dtype(lib: Any, name: str) -> Any:
    return getattr(lib, name)


def _as_float32(t: Any) -> np.ndarray:
    if isinstance(t, zgrad.Tensor):
        return t.detach().to(zgrad.float32).numpy()
    return t.detach().float().numpy()


def _dtype_name(t: Any) -> str:
    return str(t.dtype).removeprefix("torch.")


def _run(lib: Any, fn: Callable[..., Any], arrays: list[np.ndarray], dtype: str, upstream_seed: int):
    leaves = [lib.tensor(a).to(_lib_dtype(lib, dtype)).requires_grad_() for a in arrays]
    out = fn(lib, *leaves)
    upstream = np.random.default_rng(upstream_seed).standard_normal(tuple(out.shape)).astype(np.float32)
    out.backward(lib.tensor(upstream).to(out.dtype))
    return out, leaves


def _check(fn: Callable[..., Any], shapes: list[tuple[int, ...]], dtype: str, domain=(-2.0, 2.0), seed: int = 0,
           grads: bool = True, scale: float | None = 1.0) -> None:
    """zgrad and torch agree on ``fn``'s output (dtype, shape, values) and, when ``grads``, on each
    input's gradient, which has the input's dtype; ``scale`` multiplies the absolute tolerance
    (None: by the largest magnitude torch gives)."""
    rng = np.random.default_rng(seed)
    arrays = [rng.uniform(*domain, size=s).astype(np.float32) for s in shapes]
    if not grads:
        ours = fn(zgrad, *(zgrad.tensor(a).to(getattr(zgrad, dtype)) for a in arrays))
        theirs = fn(torch, *(torch.tensor(a).to(getattr(torch, dtype)) for a in arrays))
        _compare(ours, theirs, dtype, scale)
        return
    ours, our_leaves = _run(zgrad, fn, arrays, dtype, seed + 1)
    theirs, their_leaves = _run(torch, fn, arrays, dtype, seed + 1)
    _compare(ours, theirs, dtype, scale)
    for i, (mine, ref) in enumerate(zip(our_leaves, their_leaves)):
        assert (mine.grad is None) == (ref.grad is None), f"input {i}: gradient presence differs"
        if ref.grad is not None:
            assert mine.grad.dtype == mine.dtype, f"input {i}: gradient dtype {mine.grad.dtype}, input {mine.dtype}"
            _compare(mine.grad, ref.grad, dtype, scale, f"gradient of input {i}")


def _compare(ours: Any, theirs: Any, dtype: str, scale: float | None, what: str = "result") -> None:
    if isinstance(theirs, (tuple, list)):
        for a, b in zip(ours, theirs):
            _compare(a, b, dtype, scale, what)
        return
    assert _dtype_name(ours) == _dtype_name(theirs), f"{what}: dtype {ours.dtype}, torch {theirs.dtype}"
    assert tuple(ours.shape) == tuple(theirs.shape), f"{what}: shape {tuple(ours.shape)}, torch {tuple(theirs.shape)}"
    rtol, atol = TOLERANCE.get(_dtype_name(theirs), (0, 0))
    want = _as_float32(theirs)
    if scale is None:  # a sum of many products: torch rounds some of its partial sums, so tolerate
        scale = float(np.abs(want).max(initial=1.0))  # an error relative to the largest magnitude
    np.testing.assert_allclose(_as_float32(ours), want, rtol=rtol, atol=atol * scale,
                               err_msg=f"{what} differs from torch")


def _F(lib: Any) -> Any:
    return lib.nn.functional


ELEMENTWISE = {
    "add": (lambda L, a, b: a + b, [(3, 4), (4,)]),
    "mul": (lambda L, a, b: a * b, [(3, 4), (3, 4)]),
    "div": (lambda L, a, b: a / b, [(3, 4), (3, 4)]),
    "sub-scalar": (lambda L, a: 1.5 - a, [(5,)]),
    "exp": (lambda L, a: a.exp(), [(3, 4)]),
    "tanh": (lambda L, a: a.tanh(), [(3, 4)]),
    "sigmoid": (lambda L, a: a.sigmoid(), [(3, 4)]),
    "relu": (lambda L, a: a.relu(), [(3, 4)]),
    "abs": (lambda L, a: a.abs(), [(3, 4)]),
    "sin": (lambda L, a: L.sin(a), [(3, 4)]),
    "pow": (lambda L, a: a ** 3, [(3, 4)]),
    "clamp": (lambda L, a: a.clamp(-0.5, 0.7), [(3, 4)]),
    "where": (lambda L, a, b: L.where(a > 0, a, b), [(3, 4), (3, 4)]),
    "lerp": (lambda L, a, b: L.lerp(a, b, 0.3), [(3, 4), (3, 4)]),
    "addcmul_": (lambda L, a, b, c: (a * 1).addcmul_(b, c, value=0.5), [(3, 4), (3, 4), (3, 4)]),
    "gelu": (lambda L, a: _F(L).gelu(a), [(3, 4)]),
    "gelu-tanh": (lambda L, a: _F(L).gelu(a, approximate="tanh"), [(3, 4)]),
    "leaky_relu": (lambda L, a: _F(L).leaky_relu(a, 0.1), [(3, 4)]),
    "elu": (lambda L, a: _F(L).elu(a), [(3, 4)]),
}
POSITIVE = {
    "log": (lambda L, a: a.log(), [(3, 4)]),
    "sqrt": (lambda L, a: a.sqrt(), [(3, 4)]),
    "rsqrt": (lambda L, a: L.rsqrt(a), [(3, 4)]),
}
REDUCTIONS = {
    "sum": (lambda L, a: a.sum(1), [(4, 33)]),
    "mean": (lambda L, a: a.mean(), [(4, 33)]),
    "var": (lambda L, a: a.var(1), [(4, 33)]),
    "std": (lambda L, a: a.std(0), [(4, 33)]),
    "logsumexp": (lambda L, a: a.logsumexp(1), [(4, 33)]),
    "max-dim": (lambda L, a: a.max(1).values, [(4, 33)]),
    "min-dim": (lambda L, a: a.min(0).values, [(4, 33)]),
    "amax": (lambda L, a: a.amax(1), [(4, 33)]),
    "prod": (lambda L, a: a.prod(1), [(4, 5)]),
    "norm": (lambda L, a: L.linalg.vector_norm(a), [(4, 33)]),
    "cumsum": (lambda L, a: a.cumsum(1), [(4, 9)]),
    "cumprod": (lambda L, a: a.cumprod(1), [(4, 6)]),
    "logcumsumexp": (lambda L, a: L.logcumsumexp(a, 1), [(4, 9)]),
    "cummax": (lambda L, a: L.cummax(a, 1).values, [(4, 9)]),
    "softmax": (lambda L, a: a.softmax(-1), [(4, 33)]),
    "log_softmax": (lambda L, a: a.log_softmax(0), [(4, 33)]),
    "layer_norm": (lambda L, a, w, b: _F(L).layer_norm(a, (8,), w, b), [(3, 8), (8,), (8,)]),
    "group_norm": (lambda L, a, w, b: _F(L).group_norm(a, 2, w, b), [(2, 4, 5), (4,), (4,)]),
    "batch_norm": (lambda L, a, w, b: _F(L).batch_norm(a, None, None, w, b, training=True), [(6, 3), (3,), (3,)]),
}
LOSSES = {
    "mse_loss": (lambda L, a, b: _F(L).mse_loss(a, b), [(4, 5), (4, 5)]),
    "l1_loss": (lambda L, a, b: _F(L).l1_loss(a, b), [(4, 5), (4, 5)]),
    "smooth_l1_loss": (lambda L, a, b: _F(L).smooth_l1_loss(a, b), [(4, 5), (4, 5)]),
    "bce_with_logits": (lambda L, a, b: _F(L).binary_cross_entropy_with_logits(a, b.sigmoid()), [(4, 5), (4, 5)]),
    "kl_div": (lambda L, a, b: _F(L).kl_div(a.log_softmax(-1), b.log_softmax(-1), reduction="batchmean",
                                             log_target=True), [(4, 5), (4, 5)]),
    "cross_entropy": (lambda L, a: _F(L).cross_entropy(a, L.tensor([0, 3, 1, 4])), [(4, 5)]),
    "cross_entropy-smoothing": (lambda L, a: _F(L).cross_entropy(a, L.tensor([0, 3, 1, 4]), label_smoothing=0.1),
                                [(4, 5)]),
    "nll_loss": (lambda L, a: _F(L).nll_loss(a.log_softmax(-1), L.tensor([0, 3, 1, 4])), [(4, 5)]),
}
PRODUCTS = {
    "matmul": (lambda L, a, b: a @ b, [(5, 40), (40, 3)]),
    "matmul-batched": (lambda L, a, b: L.matmul(a, b), [(2, 5, 16), (16, 3)]),
    "bmm": (lambda L, a, b: L.bmm(a, b), [(2, 5, 16), (2, 16, 3)]),
    "linear": (lambda L, x, w, b: _F(L).linear(x, w, b), [(4, 16), (6, 16), (6,)]),
    "conv2d": (lambda L, x, w, b: _F(L).conv2d(x, w, b, padding=1), [(2, 3, 6, 6), (4, 3, 3, 3), (4,)]),
    "conv2d-stride-groups": (lambda L, x, w: _F(L).conv2d(x, w, stride=2, groups=2), [(1, 4, 7, 7), (4, 2, 3, 3)]),
    "max_pool2d": (lambda L, x: _F(L).max_pool2d(x, 2), [(2, 3, 6, 6)]),
    "avg_pool2d": (lambda L, x: _F(L).avg_pool2d(x, 3, stride=2, padding=1), [(2, 3, 6, 6)]),
    "adaptive_avg_pool2d": (lambda L, x: _F(L).adaptive_avg_pool2d(x, (2, 3)), [(2, 3, 6, 6)]),
    "embedding": (lambda L, w: _F(L).embedding(L.tensor([[1, 3], [3, 0]]), w), [(5, 4)]),
    "interpolate-bilinear": (lambda L, x: _F(L).interpolate(x, scale_factor=2, mode="bilinear"), [(1, 2, 3, 4)]),
}
INDEXING = {
    "getitem": (lambda L, a: a[L.tensor([2, 0, 2]), 1:], [(4, 5)]),
    "gather": (lambda L, a: L.gather(a, 1, L.tensor([[0, 4], [1, 1], [3, 2], [0, 0]])), [(4, 5)]),
    "index_select": (lambda L, a: L.index_select(a, 0, L.tensor([3, 1, 3])), [(4, 5)]),
    "scatter_add": (lambda L, a, s: a.scatter_add(1, L.tensor([[0, 1], [2, 2], [4, 0], [1, 1]]), s),
                    [(4, 5), (4, 2)]),
    "index_add": (lambda L, a, s: a.index_add(0, L.tensor([1, 1, 0]), s), [(4, 5), (3, 5)]),
    "masked_fill": (lambda L, a: a.masked_fill(a > 0.5, -1.0), [(4, 5)]),
    "take_along_dim": (lambda L, a: L.take_along_dim(a, L.tensor([[0], [2], [1], [4]]), 1), [(4, 5)]),
    "sort": (lambda L, a: L.sort(a, 1).values, [(4, 9)]),
    "topk": (lambda L, a: L.topk(a, 3, 1).values, [(4, 9)]),
    "cat-stack": (lambda L, a, b: L.stack([L.cat([a, b]), L.cat([b, a])]), [(2, 3), (2, 3)]),
    "transpose-contiguous": (lambda L, a: a.t().contiguous() * 2, [(4, 5)]),
}
NO_GRAD = {
    "argmax": (lambda L, a: a.argmax(1), [(4, 33)]),
    "argmin": (lambda L, a: a.argmin(), [(4, 33)]),
    "max-dim-indices": (lambda L, a: a.max(1).indices, [(4, 33)]),
    "argsort": (lambda L, a: L.argsort(a, 1), [(4, 9)]),
    "eq": (lambda L, a, b: a > b, [(4, 5), (4, 5)]),
    "isclose": (lambda L, a: L.isclose(a, a + 1e-4), [(4, 5)]),
    "searchsorted": (lambda L, a, b: L.searchsorted(L.sort(a).values, b), [(9,), (4,)]),
}


def _cases(table: dict, **options) -> list:
    return [pytest.param(fn, shapes, options, id=name) for name, (fn, shapes) in table.items()]


@pytest.mark.torch
@pytest.mark.parametrize("dtype", HALF)
@pytest.mark.parametrize("fn, shapes, options", _cases(ELEMENTWISE) + _cases(POSITIVE, domain=(0.5, 2.5))
                         + _cases(REDUCTIONS) + _cases(LOSSES) + _cases(PRODUCTS, scale=None) + _cases(INDEXING)
                         + _cases(NO_GRAD, grads=False))
def test_ops_on_half_tensors_match_torch(fn, shapes, options, dtype):
    _check(fn, shapes, dtype, **options)


@pytest.mark.torch
@pytest.mark.parametrize("dtype", HALF)
def test_matmul_and_sum_accumulate_in_float32(dtype):
    # 4096 ones: a float16 accumulator stops at 2048 (2048 + 1 rounds back to 2048), bfloat16 at 256
    ones = zgrad.ones(1, 4096, dtype=getattr(zgrad, dtype))
    assert (ones @ ones.t()).item() == 4096.0
    assert ones.sum().item() == 4096.0
    assert ones.cumsum(1)[0, -1].item() == 4096.0
    want = torch.ones(1, 4096, dtype=getattr(torch, dtype))
    assert (want @ want.t()).item() == 4096.0 and want.sum().item() == 4096.0


@pytest.mark.torch
@pytest.mark.parametrize("dtype", HALF)
@pytest.mark.parametrize("name, call", [
    ("zeros", lambda L, d: L.zeros(2, 3, dtype=d)),
    ("ones", lambda L, d: L.ones(2, 3, dtype=d)),
    ("full", lambda L, d: L.full((2, 3), 1.3, dtype=d)),
    ("arange", lambda L, d: L.arange(0, 3, 0.25, dtype=d)),
    ("linspace", lambda L, d: L.linspace(-1, 1, 7, dtype=d)),
    ("eye", lambda L, d: L.eye(3, dtype=d)),
    ("tensor", lambda L, d: L.tensor([0.1, 1000.7, -3.3], dtype=d)),
    ("zeros_like", lambda L, d: L.zeros_like(L.ones(2, dtype=d))),
])
def test_creation_with_a_half_dtype_matches_torch(name, call, dtype):
    _compare(call(zgrad, getattr(zgrad, dtype)), call(torch, getattr(torch, dtype)), dtype, 1.0)


@pytest.mark.parametrize("dtype", HALF)
@pytest.mark.parametrize("draw", [zgrad.rand, zgrad.randn])
def test_random_creation_with_a_half_dtype(draw, dtype):
    zgrad.manual_seed(0)
    x = draw(1000, dtype=getattr(zgrad, dtype))
    assert x.dtype == getattr(zgrad, dtype)
    values = x.to(zgrad.float32).numpy()
    assert 0.4 < values.mean() < 0.6 if draw is zgrad.rand else abs(values.mean()) < 0.15
    assert zgrad.randint(0, 5, (10,), dtype=getattr(zgrad, dtype)).dtype == getattr(zgrad, dtype)


@pytest.mark.torch
@pytest.mark.parametrize("dtype", HALF)
@pytest.mark.parametrize("name, make", [
    ("SGD-momentum", lambda L, p: L.optim.SGD(p, lr=0.1, momentum=0.9, weight_decay=0.01)),
    ("Adam", lambda L, p: L.optim.Adam(p, lr=0.01)),
    ("AdamW", lambda L, p: L.optim.AdamW(p, lr=0.01, weight_decay=0.1)),
])
def test_optimizer_steps_on_half_parameters_match_torch(name, make, dtype):
    start = np.random.default_rng(0).standard_normal((4, 3)).astype(np.float32)
    results = []
    for lib in (zgrad, torch):
        p = lib.tensor(start).to(getattr(lib, dtype)).requires_grad_()
        opt = make(lib, [p])
        for _ in range(3):
            opt.zero_grad()
            ((p * p).sum() + p.sum()).backward()
            opt.step()
        results.append(p)
    _compare(*results, dtype, 1.0)


@pytest.mark.torch
@pytest.mark.filterwarnings("error::RuntimeWarning")  # overflow to inf is silent, as in torch
def test_half_and_bfloat16_convert_as_torch():
    x = zgrad.tensor([1.0, 2.0 ** -20, 70000.0, 1.0 / 3.0])
    t = torch.tensor([1.0, 2.0 ** -20, 70000.0, 1.0 / 3.0])
    for ours, theirs in ((x.half(), t.half()), (x.bfloat16(), t.bfloat16()), (x.to(zgrad.bfloat16), t.bfloat16())):
        assert _dtype_name(ours) == _dtype_name(theirs)
        np.testing.assert_array_equal(_as_float32(ours), _as_float32(theirs))  # inf, subnormals, rounding alike
    model = zgrad.nn.Linear(3, 2).bfloat16()
    assert model.weight.dtype == zgrad.bfloat16 and model.bias.dtype == zgrad.bfloat16
    assert model.half().weight.dtype == zgrad.float16
    assert x.bfloat16().is_floating_point() and x.half().is_floating_point()


def test_gradients_flow_back_into_each_inputs_dtype():
    x = zgrad.randn(3, requires_grad=True)
    y = zgrad.randn(3, dtype=zgrad.bfloat16, requires_grad=True)
    z = zgrad.randn(3, dtype=zgrad.float16, requires_grad=True)
    out = x.bfloat16() * y + z
    assert out.dtype == zgrad.float32  # bfloat16 with float16 promotes to float32, as torch
    out.sum().backward()
    assert (x.grad.dtype, y.grad.dtype, z.grad.dtype) == (zgrad.float32, zgrad.bfloat16, zgrad.float16)


DTYPES = ["bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32", "float64"]


@pytest.mark.torch
def test_promotion_of_every_pair_matches_torch():
    for a in DTYPES:
        for b in DTYPES:
            want = str(torch.promote_types(getattr(torch, a), getattr(torch, b))).removeprefix("torch.")
            assert str(zgrad.promote_types(getattr(zgrad, a), getattr(zgrad, b))) == want, (a, b)


@pytest.mark.torch
@pytest.mark.parametrize("dtype", HALF)
def test_result_types_with_numbers_and_zero_dim_tensors_match_torch(dtype):
    for lib in (zgrad, torch):
        d = getattr(lib, dtype)
        x = lib.ones(2, dtype=d)
        got = [(x + 1.5).dtype, (x + 2).dtype, (x + lib.tensor(1.0, dtype=lib.float64)).dtype,
               (lib.ones(2, dtype=lib.int64) + lib.tensor(1.0, dtype=d)).dtype, (x * lib.ones(2)).dtype]
        assert [str(g).removeprefix("torch.") for g in got] == \
            [dtype, dtype, dtype, dtype, "float32"], lib.__name__


@pytest.mark.torch
@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "float64"])
def test_finfo_matches_torch(dtype):
    ours, theirs = zgrad.finfo(getattr(zgrad, dtype)), torch.finfo(getattr(torch, dtype))
    for attribute in ("bits", "eps", "max", "min", "tiny", "smallest_normal", "resolution", "dtype"):
        assert getattr(ours, attribute) == getattr(theirs, attribute), attribute
        assert type(getattr(ours, attribute)) is type(getattr(theirs, attribute)), attribute
    assert repr(ours) == repr(theirs)


def test_finfo_without_a_dtype_is_the_default_dtypes():
    assert zgrad.finfo() == zgrad.finfo(zgrad.float32)
    zgrad.set_default_dtype(zgrad.float64)
    try:
        assert zgrad.finfo().dtype == "float64"
    finally:
        zgrad.set_default_dtype(zgrad.float32)


@pytest.mark.torch
@pytest.mark.parametrize("dtype", ["uint8", "int8", "int16", "int32", "int64"])
def test_iinfo_matches_torch(dtype):
    ours, theirs = zgrad.iinfo(getattr(zgrad, dtype)), torch.iinfo(getattr(torch, dtype))
    for attribute in ("bits", "max", "min", "dtype"):
        assert getattr(ours, attribute) == getattr(theirs, attribute), attribute
    assert repr(ours) == repr(theirs)


@pytest.mark.parametrize("dtype", ["int32", "bool"])
def test_finfo_of_a_non_floating_dtype_is_refused(dtype):
    with pytest.raises(TypeError, match=f"zgrad.{dtype} is not a floating point type"):
        zgrad.finfo(getattr(zgrad, dtype))


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "bool"])
def test_iinfo_of_a_non_integer_dtype_is_refused(dtype):
    with pytest.raises(TypeError, match=f"zgrad.{dtype} is not supported by zgrad.iinfo"):
        zgrad.iinfo(getattr(zgrad, dtype))
