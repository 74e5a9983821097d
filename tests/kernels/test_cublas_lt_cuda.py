"""A linear layer's bias added, and its gradient summed, in cuBLASLt's epilogues
(``zgrad.kernels.cuda.cublas_lt``).

In Numba's simulator there is no cuBLASLt: a stand-in computes each ``cublasLtMatmul`` from the
simulator's host memory as the library defines it (stored shapes, leading dimensions, transposes,
the bias added down the column-major rows or its gradient summed over k), so a wrong layout or
vector pointer gives a wrong product or gradient. On a real GPU (``ZGRAD_TEST_REAL_GPU=1``) the
library itself must take the products and pass the check each dtype's first product gets.
"""

from __future__ import annotations

import numpy as np
import pytest
from cublas_stand_in import install_lt_stand_in
from cuda_helpers import REAL_GPU, SIMULATOR, TOLERANCE, requires_cuda

import zgrad
import zgrad.nn.functional as F
from zgrad.kernels.promotion import BFLOAT16

pytestmark = requires_cuda
simulator_only = pytest.mark.skipif(not SIMULATOR, reason="the stand-in reads the simulator's host memory")

_BIAS, _BGRADB = 4, 512  # CUBLASLT_EPILOGUE_BIAS, CUBLASLT_EPILOGUE_BGRADB


def _linear_cases(rng):
    x3 = rng.standard_normal((2, 5, 7))
    return {
        "rows": (rng.standard_normal((6, 7)), lambda x: x),
        "3-d input folded into rows": (x3, lambda x: x),
        "sequence-first view (copied to rows)": (x3, lambda x: x.transpose(0, 1)),
        "one row": (rng.standard_normal((1, 7)), lambda x: x),
        "vector": (rng.standard_normal(7), lambda x: x),
        "column slice (lda > k)": (rng.standard_normal((6, 10)), lambda x: x[:, 3:]),
    }


@simulator_only
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("case", list(_linear_cases(np.random.default_rng(0))))
def test_linear_adds_its_bias_in_the_epilogue_for_every_layout(monkeypatch, case, dtype):
    lt = install_lt_stand_in(monkeypatch)
    rng = np.random.default_rng(1)
    data, view = _linear_cases(rng)[case]
    w, b = rng.standard_normal((4, 7)).astype(dtype), rng.standard_normal(4).astype(dtype)
    results = [F.linear(view(zgrad.tensor(data.astype(dtype), device=device)), zgrad.tensor(w, device=device),
                        zgrad.tensor(b, device=device)) for device in ("cuda", "cpu")]
    products = [m for m in lt.matmuls if m["shape"] != (6, 5)]  # past the dtype's check (5 x 6 products)
    assert [m["epilogue"] for m in products] == [_BIAS], "one product, with the bias in its epilogue"
    assert products[0]["transa"] == 1, "the weight read transposed in place"
    np.testing.assert_allclose(results[0].cpu().numpy(), results[1].numpy(), **TOLERANCE[np.dtype(dtype)])


@simulator_only
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("case", ["rows", "3-d input folded into rows", "one row"])
def test_linear_backward_sums_the_bias_gradient_in_the_weight_gradients_epilogue(monkeypatch, case, dtype):
    from zgrad.kernels.cuda import kernels
    from zgrad.kernels.cuda import runtime as rt
    lt = install_lt_stand_in(monkeypatch)
    launched = []
    launch = rt.launch
    monkeypatch.setattr(rt, "launch", lambda kernel, *args: launched.append(kernel) or launch(kernel, *args))
    rng = np.random.default_rng(8)
    data, _ = _linear_cases(rng)[case]
    w, b = rng.standard_normal((4, 7)).astype(dtype), rng.standard_normal(4).astype(dtype)
    g = rng.standard_normal(data.shape[:-1] + (4,)).astype(dtype)
    grads = []
    for device in ("cuda", "cpu"):
        leaves = [zgrad.tensor(v.astype(dtype), device=device, requires_grad=True) for v in (data, w, b)]
        F.linear(*leaves).backward(zgrad.tensor(g, device=device))
        grads.append([leaf.grad.cpu().numpy() for leaf in leaves])
    products = [m for m in lt.matmuls if m["shape"] != (6, 5)]
    assert [m["epilogue"] for m in products] == [_BIAS, _BGRADB], "the forward's product, the weight gradient's"
    assert products[1]["transb"] == (case != "one row"), "the output gradient read transposed in place"
    assert kernels.rows.column_reduce not in launched and kernels.rows.row_reduce not in launched
    for mine, expected in zip(*grads):
        np.testing.assert_allclose(mine, expected, **TOLERANCE[np.dtype(dtype)])


@simulator_only
def test_a_wrong_bias_gradient_turns_its_epilogue_off_and_the_gradients_stay_right(monkeypatch):
    from zgrad.kernels.cuda import cublas_lt
    install_lt_stand_in(monkeypatch)
    assert cublas_lt._check_epilogue(np.dtype(np.float32), cublas_lt.BIAS)  # the forward's epilogue works
    monkeypatch.setattr(cublas_lt._library(), "drop_bias", True)
    rng = np.random.default_rng(9)
    x, w, b = (rng.standard_normal(shape).astype(np.float32) for shape in ((8, 6), (5, 6), (5,)))
    leaves = [zgrad.tensor(v, device="cuda", requires_grad=True) for v in (x, w, b)]
    g = rng.standard_normal((8, 5)).astype(np.float32)
    with pytest.warns(RuntimeWarning, match="cuBLASLt's bias-gradient epilogue is off for float32 in this process"):
        F.linear(*leaves).backward(zgrad.tensor(g, device="cuda"))  # the forward's bias is dropped: not checked here
    np.testing.assert_allclose(leaves[2].grad.cpu().numpy(), g.sum(0), **TOLERANCE[np.dtype(np.float32)])
    np.testing.assert_allclose(leaves[1].grad.cpu().numpy(), g.T @ x, **TOLERANCE[np.dtype(np.float32)])
    assert cublas_lt.available(np.float32, cublas_lt.BIAS) and not cublas_lt.available(np.float32, cublas_lt.BIAS_GRADIENT)


@simulator_only
def test_each_dtype_is_checked_once_then_its_plans_are_kept(monkeypatch):
    """A plan (descriptors, algorithm) per problem and pointer alignments: the simulator's
    allocations are aligned as numpy's happen to be, so alignment is fixed here but for one call."""
    from zgrad.kernels.cuda import cublas_lt
    lt = install_lt_stand_in(monkeypatch)
    monkeypatch.setattr(cublas_lt, "_alignment", lambda address: 256)
    x, w, b = (zgrad.randn(*shape, device="cuda") for shape in ((9, 6), (5, 6), (5,)))
    for _ in range(3):
        F.linear(x[1:], w, b)
    checks = [m for m in lt.matmuls if m["shape"] == (6, 5)]
    assert len(checks) == 2, "the weight's layout and a plain one, once"
    assert len(lt.matmuls) == 5 and lt.heuristics == 3, "one plan for the three equal products"
    monkeypatch.undo()
    lt = install_lt_stand_in(monkeypatch)
    F.linear(x[:8], w, b)
    F.linear(x[1:], w, b)  # x's start 24 bytes further: less aligned than cuBLASLt assumes
    assert lt.heuristics == 2 + 2
    F.linear(x.double(), w.double(), b.double())
    assert len(lt.matmuls) == 2 + 2 + 3, "float64 checked on its first product"


@simulator_only
@pytest.mark.parametrize("dtype", [np.float16, BFLOAT16], ids=["float16", "bfloat16"])
def test_half_linear_layers_add_the_bias_in_the_epilogue_and_without_it_in_float32(monkeypatch, dtype):
    rng = np.random.default_rng(3)
    x, w, b = (rng.standard_normal(shape).astype(dtype) for shape in ((9, 7), (5, 7), (5,)))
    wide = [v.astype(np.float32) for v in (x, w, b)]
    expected = (wide[0] @ wide[1].T + wide[2]).astype(dtype).astype(np.float32)
    tensors = [zgrad.tensor(v, device="cuda") for v in (x, w, b)]
    lt = install_lt_stand_in(monkeypatch)
    result = F.linear(*tensors)
    assert lt.matmuls[-1]["epilogue"] == _BIAS
    np.testing.assert_allclose(result.cpu().to(zgrad.float32).numpy(), expected, **TOLERANCE[np.dtype(dtype)])
    from zgrad.kernels.cuda import cublas_lt
    monkeypatch.setattr(cublas_lt, "_library", lambda: None)  # no cuBLASLt: the product, then the bias
    result = F.linear(*tensors)
    np.testing.assert_allclose(result.cpu().to(zgrad.float32).numpy(), expected, **TOLERANCE[np.dtype(dtype)])


@simulator_only
@pytest.mark.parametrize("options, warning", [({"drop_bias": True}, "came out wrong"), ({"status": 13}, "STATUS_13"),
                                              ({"status": 15}, None)],
                         ids=["wrong product", "refused", "not supported"])
def test_a_dtype_cublaslt_gets_wrong_or_lacks_keeps_the_addition(monkeypatch, recwarn, options, warning):
    """A wrong product or a refused call turns the path off for the dtype with a warning; no
    algorithm for it (CUBLAS_STATUS_NOT_SUPPORTED) does so silently. Products stay right."""
    lt = install_lt_stand_in(monkeypatch, **options)
    rng = np.random.default_rng(4)
    x, w, b = (rng.standard_normal(shape).astype(np.float32) for shape in ((8, 6), (5, 6), (5,)))
    result = F.linear(*(zgrad.tensor(v, device="cuda") for v in (x, w, b)))
    np.testing.assert_allclose(result.cpu().numpy(), x @ w.T + b, **TOLERANCE[np.dtype(np.float32)])
    messages = [str(w.message) for w in recwarn.list if issubclass(w.category, RuntimeWarning)]
    if warning is None:
        assert not messages
    else:
        assert len(messages) == 1 and "cuBLASLt's bias epilogue is off for float32 in this process" in messages[0]
        assert warning in messages[0]
    calls = len(lt.matmuls)
    F.linear(*(zgrad.tensor(v, device="cuda") for v in (x, w, b)))
    assert len(lt.matmuls) == calls, "not asked again"
    from zgrad.kernels.cuda import cublas_lt
    assert not cublas_lt.available(np.float32) and cublas_lt.available(np.float64)


@simulator_only
def test_a_bias_the_epilogue_cannot_take_is_added_after_the_product(monkeypatch):
    """A strided bias, a 0-d bias and a batched product keep the separate addition."""
    lt = install_lt_stand_in(monkeypatch)
    rng = np.random.default_rng(6)
    x, w, b = (rng.standard_normal(shape).astype(np.float32) for shape in ((8, 6), (5, 6), (10,)))
    dx, dw, db = (zgrad.tensor(v, device="cuda") for v in (x, w, b))
    np.testing.assert_allclose(F.linear(dx, dw, db[::2]).cpu().numpy(), x @ w.T + b[::2],
                               **TOLERANCE[np.dtype(np.float32)])
    np.testing.assert_allclose(F.linear(dx, dw, db[3]).cpu().numpy(), x @ w.T + b[3], **TOLERANCE[np.dtype(np.float32)])
    assert not [m for m in lt.matmuls if m["shape"] != (6, 5)]


@pytest.mark.gpu
@pytest.mark.skipif(not REAL_GPU, reason="needs a real CUDA GPU (run with ZGRAD_TEST_REAL_GPU=1 on a machine with one)")
def test_on_a_gpu_cublaslt_takes_linear_layers_and_passes_its_check():
    """Forward and backward against float64 on the host; cuBLASLt must take float32 and float16
    forward products, and neither epilogue may have been turned off with a warning (a dtype with
    no algorithm for the bias gradient keeps the column sums silently)."""
    import warnings

    from zgrad.kernels.cuda import cublas_lt
    rng = np.random.default_rng(7)
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message="cuBLASLt", category=RuntimeWarning)
        for dtype in (np.float32, np.float64, np.float16):
            x, w, b, g = (rng.standard_normal(shape).astype(dtype) for shape in ((65, 33), (17, 33), (17,), (65, 17)))
            leaves = [zgrad.tensor(v, device="cuda", requires_grad=True) for v in (x, w, b)]
            out = F.linear(*leaves)
            out.backward(zgrad.tensor(g, device="cuda"))
            wide = [v.astype(np.float64) for v in (x, w, b, g)]
            expected = [wide[0] @ wide[1].T + wide[2], wide[3] @ wide[1], wide[3].T @ wide[0], wide[3].sum(0)]
            for got, want in zip([out, *(leaf.grad for leaf in leaves)], expected):
                np.testing.assert_allclose(got.detach().cpu().numpy(), want.astype(dtype), **TOLERANCE[np.dtype(dtype)])
            if dtype != np.float64:  # float64 may have no algorithm with a bias: then the addition runs
                assert cublas_lt._works.get((np.dtype(dtype), cublas_lt.BIAS)), "cuBLASLt did not take the bias"
