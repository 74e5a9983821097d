"""The CUDA backend's matrix products through cuBLAS.

In Numba's simulator there is no cuBLAS, and products run zgrad's own kernel. The layout
arithmetic that maps row-major views onto cuBLAS's column-major GEMM is checked there anyway: a
stand-in for ``cublasGemmStridedBatchedEx`` computes each call from the simulator's host memory
exactly as cuBLAS defines it (column-major operands, op N/T, leading dimensions, batch strides),
so a wrong operation, leading dimension or stride gives a wrong product. On a real GPU
(``ZGRAD_TEST_REAL_GPU=1``) the library itself must be the path taken.
"""

from __future__ import annotations

import numpy as np
import pytest
from cublas_stand_in import install_stand_in
from cuda_helpers import REAL_GPU, SIMULATOR, TOLERANCE, requires_cuda

import zgrad
from zgrad.kernels.promotion import BFLOAT16

pytestmark = requires_cuda


@pytest.fixture
def stand_in(monkeypatch):
    return install_stand_in(monkeypatch)


def _operands():
    rng = np.random.default_rng(0)
    base = rng.standard_normal((2, 3, 7, 9))
    other = rng.standard_normal((3, 9, 5))
    return {
        "plain": (rng.standard_normal((6, 4)), rng.standard_normal((4, 5)), lambda a, b: a @ b),
        "a transposed": (rng.standard_normal((4, 6)), rng.standard_normal((4, 5)), lambda a, b: a.T @ b),
        "b transposed": (rng.standard_normal((6, 4)), rng.standard_normal((5, 4)), lambda a, b: a @ b.T),
        "both transposed": (rng.standard_normal((4, 6)), rng.standard_normal((5, 4)), lambda a, b: a.T @ b.T),
        "batched, broadcast weight": (base, other[0], lambda a, b: a @ b),
        "batch broadcast both ways": (base[:, :1], other, lambda a, b: a @ b),
        "column slice (lda > k)": (rng.standard_normal((6, 10)), rng.standard_normal((4, 5)), lambda a, b: a[:, 2:6] @ b),
        "row vector": (rng.standard_normal((1, 4)), rng.standard_normal((4, 5)), lambda a, b: a @ b),
        "matrix @ vector": (rng.standard_normal((6, 4)), rng.standard_normal(4), lambda a, b: a @ b),
        "vector @ transposed matrix": (rng.standard_normal(4), rng.standard_normal((5, 4)), lambda a, b: a @ b.T),
        "outer (k = 1)": (rng.standard_normal((6, 1)), rng.standard_normal((1, 5)), lambda a, b: a @ b),
    }


@pytest.mark.skipif(not SIMULATOR, reason="the stand-in reads the simulator's host memory")
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("case", list(_operands()))
def test_the_gemm_call_computes_every_layout_right(stand_in, case, dtype):
    a, b, product = _operands()[case]
    expected = product(a.astype(dtype), b.astype(dtype))
    result = product(zgrad.tensor(a.astype(dtype), device="cuda"), zgrad.tensor(b.astype(dtype), device="cuda"))
    assert stand_in.calls, "the product did not go through the cuBLAS call"
    assert result.dtype == zgrad.float32 if dtype == np.float32 else zgrad.float64
    np.testing.assert_allclose(result.cpu().numpy(), expected, **TOLERANCE[np.dtype(dtype)])


@pytest.mark.skipif(not SIMULATOR, reason="the stand-in reads the simulator's host memory")
@pytest.mark.parametrize("dtype", [np.float16, BFLOAT16], ids=["float16", "bfloat16"])
def test_half_products_go_to_cublas_as_they_are_and_without_it_in_float32(stand_in, monkeypatch, dtype):
    rng = np.random.default_rng(2)
    a, b = rng.standard_normal((2, 9, 7)).astype(dtype), rng.standard_normal((7, 5)).astype(dtype)
    expected = (a.astype(np.float32) @ b.astype(np.float32)).astype(dtype).astype(np.float32)
    da, db = zgrad.tensor(a, device="cuda"), zgrad.tensor(b, device="cuda")
    result = (da @ db).cpu().to(zgrad.float32).numpy()
    (call,) = stand_in.calls
    assert call["compute"] == 68, "half inputs, float32 accumulation"
    np.testing.assert_allclose(result, expected, **TOLERANCE[np.dtype(dtype)])
    from zgrad.kernels.cuda import cublas
    monkeypatch.setattr(cublas, "_library", lambda: None)  # no cuBLAS: zgrad's kernel, in float32
    np.testing.assert_allclose((da @ db).cpu().to(zgrad.float32).numpy(), expected, **TOLERANCE[np.dtype(dtype)])


@pytest.mark.skipif(not SIMULATOR, reason="the stand-in reads the simulator's host memory")
def test_a_transposed_view_is_not_copied_and_broadcast_batches_have_stride_zero(stand_in):
    a = zgrad.randn(8, 6, device="cuda")
    w = zgrad.randn(5, 6, device="cuda")
    a @ w.T
    (call,) = stand_in.calls
    assert (call["op_a"], call["op_b"]) == (1, 0), "w.T is read transposed in place, a as it is"
    stand_in.calls.clear()
    zgrad.randn(4, 8, 6, device="cuda") @ zgrad.randn(6, 3, device="cuda")
    (call,) = stand_in.calls
    assert call["batch"] == 4 and call["stride_a"] == 0, "the shared right operand is broadcast, not copied"


@pytest.mark.skipif(not SIMULATOR, reason="the stand-in reads the simulator's host memory")
def test_an_operand_without_a_unit_stride_is_copied_for_cublas_not_left_to_zgrads_kernel(stand_in, monkeypatch):
    """The gradient of ``.sum()`` reaches a linear layer's backward broadcast from one number
    (every stride 0), which cuBLAS cannot read: a contiguous copy of it goes to cuBLAS."""
    from zgrad.kernels.cuda import kernels
    from zgrad.kernels.cuda import runtime as rt
    launched = []
    launch = rt.launch
    monkeypatch.setattr(rt, "launch", lambda kernel, *args: launched.append(kernel) or launch(kernel, *args))
    rng = np.random.default_rng(5)
    x, w = rng.standard_normal((8, 6)).astype(np.float32), rng.standard_normal((5, 6)).astype(np.float32)
    grads = []
    for device in ("cuda", "cpu"):
        dx, dw = (zgrad.tensor(v, device=device, requires_grad=True) for v in (x, w))
        (dx @ dw.T).sum().backward()
        grads.append((dx.grad.cpu().numpy(), dw.grad.cpu().numpy()))
    assert len(stand_in.calls) == 3, "the product and both gradients' products"
    assert kernels.linalg.matmul not in launched
    for mine, expected in zip(*grads):
        np.testing.assert_allclose(mine, expected, **TOLERANCE[np.dtype(np.float32)])


@pytest.mark.skipif(not SIMULATOR, reason="the stand-in reads the simulator's host memory")
def test_tf32_is_asked_for_only_when_allowed(stand_in):
    a, b = zgrad.randn(4, 4, device="cuda"), zgrad.randn(4, 4, device="cuda")
    assert zgrad.get_float32_matmul_precision() == "highest"
    assert zgrad.backends.cuda.matmul.allow_tf32 is False
    a @ b
    zgrad.backends.cuda.matmul.allow_tf32 = True
    try:
        assert zgrad.get_float32_matmul_precision() == "high"
        a @ b
        a.double() @ b.double()
    finally:
        zgrad.set_float32_matmul_precision("highest")
    assert [c["compute"] for c in stand_in.calls] == [68, 77, 70], "float32, TF32, float64 compute types"
    assert zgrad.backends.cuda.matmul.allow_tf32 is False


@pytest.mark.skipif(not SIMULATOR, reason="the stand-in reads the simulator's host memory")
def test_convolutions_follow_cudnns_tf32_switch_on_by_default_as_pytorchs(stand_in):
    """PyTorch runs float32 convolutions in TF32 unless ``backends.cudnn.allow_tf32`` is turned
    off, whatever the matrix-product switch says; zgrad's convolution products likewise."""
    rng = np.random.default_rng(3)
    x = zgrad.tensor(rng.standard_normal((2, 3, 6, 6)).astype(np.float32), device="cuda", requires_grad=True)
    w = zgrad.tensor(rng.standard_normal((4, 3, 3, 3)).astype(np.float32), device="cuda", requires_grad=True)
    assert zgrad.backends.cudnn.allow_tf32 is True and zgrad.backends.cuda.matmul.allow_tf32 is False

    def computes() -> list[int]:
        stand_in.calls.clear()
        zgrad.nn.functional.conv2d(x, w, padding=1).sum().backward()
        return sorted({c["compute"] for c in stand_in.calls})

    assert computes() == [77], "forward, input and weight gradients in TF32"
    zgrad.backends.cudnn.allow_tf32 = False
    try:
        assert computes() == [68]
        zgrad.backends.cuda.matmul.allow_tf32 = True
        assert computes() == [68], "the matrix-product switch is not the convolutions'"
        stand_in.calls.clear()
        x[0, 0] @ x[0, 1]
        assert [c["compute"] for c in stand_in.calls] == [77]
    finally:
        zgrad.backends.cudnn.allow_tf32 = True
        zgrad.set_float32_matmul_precision("highest")
    expected = zgrad.nn.functional.conv2d(x.cpu(), w.cpu(), padding=1)
    np.testing.assert_allclose(zgrad.nn.functional.conv2d(x, w, padding=1).cpu().numpy(), expected.detach().numpy(),
                               **TOLERANCE[np.dtype(np.float32)])


def test_an_unknown_precision_is_refused_with_the_choices():
    with pytest.raises(RuntimeError, match="'highest', 'high', 'medium'"):
        zgrad.set_float32_matmul_precision("low")


def test_integer_products_do_not_use_cublas(stand_in):
    a = zgrad.arange(12, device="cuda").reshape(3, 4)
    result = a @ a.T
    assert not stand_in.calls
    np.testing.assert_array_equal(result.cpu().numpy(), np.arange(12).reshape(3, 4) @ np.arange(12).reshape(3, 4).T)


@pytest.mark.gpu
@pytest.mark.skipif(not REAL_GPU, reason="needs a real CUDA GPU (run with ZGRAD_TEST_REAL_GPU=1 on a machine with one)")
def test_on_a_gpu_the_library_takes_the_products():
    from zgrad.kernels.cuda import cublas
    assert cublas.available(), cublas.INSTALL_HINT
    rng = np.random.default_rng(1)
    for dtype in (np.float32, np.float64, np.float16):
        a, b = rng.standard_normal((3, 65, 33)).astype(dtype), rng.standard_normal((33, 17)).astype(dtype)
        result = (zgrad.tensor(a, device="cuda") @ zgrad.tensor(b, device="cuda")).cpu().numpy()
        np.testing.assert_allclose(result, (a.astype(np.float64) @ b).astype(dtype), **TOLERANCE[np.dtype(dtype)])


@pytest.mark.gpu
@pytest.mark.skipif(not REAL_GPU, reason="needs a real CUDA GPU (run with ZGRAD_TEST_REAL_GPU=1 on a machine with one)")
def test_on_a_gpu_convolutions_round_as_tf32_by_default_and_as_float32_when_told():
    """TF32 keeps 10 bits of each factor's mantissa: a convolution's error against float64 is near
    1e-3 of its scale by default, and near 1e-6 with ``zgrad.backends.cudnn.allow_tf32 = False``."""
    rng = np.random.default_rng(4)
    x, w = rng.standard_normal((4, 16, 10, 10)).astype(np.float32), rng.standard_normal((8, 16, 3, 3)).astype(np.float32)
    expected = zgrad.nn.functional.conv2d(zgrad.tensor(x.astype(np.float64)), zgrad.tensor(w.astype(np.float64))).numpy()

    def error() -> float:
        result = zgrad.nn.functional.conv2d(zgrad.tensor(x, device="cuda"), zgrad.tensor(w, device="cuda"))
        return float(np.abs(result.cpu().numpy() - expected).max() / np.abs(expected).max())

    tf32 = error()
    zgrad.backends.cudnn.allow_tf32 = False
    try:
        full = error()
    finally:
        zgrad.backends.cudnn.allow_tf32 = True
    assert 1e-5 < tf32 < 1e-2, f"default (TF32) error {tf32}"
    assert full < 1e-5, f"full float32 error {full}"
