"""float16 and bfloat16 on the CUDA backend (Numba's simulator here): tensors move to and from the
device bit for bit, bfloat16's conversions (done on its bits, Numba having no bfloat16) round as
ml_dtypes' do, and ops give the CPU's results, forward and backward, in the tensors' dtype."""

from __future__ import annotations

import numpy as np
import pytest

import zgrad
from cuda_helpers import check_device, requires_cuda

pytestmark = requires_cuda
HALF = [np.dtype(np.float16), zgrad.bfloat16]


def _F(lib):
    return lib.nn.functional


@pytest.mark.parametrize("dtype", HALF, ids=str)
def test_half_tensors_move_to_the_device_and_back_bit_for_bit(dtype):
    host = np.random.default_rng(0).standard_normal((5, 7)).astype(dtype)
    device = zgrad.tensor(host).to("cuda")
    assert device.dtype == dtype and device.device.type == "cuda"
    assert device.cpu().numpy().tobytes() == host.tobytes()
    strided = device[:, ::2].t()
    assert strided.contiguous().cpu().numpy().tobytes() == np.ascontiguousarray(host[:, ::2].T).tobytes()
    assert zgrad.full((3,), 1.3, dtype=dtype, device="cuda").cpu().numpy().tobytes() == \
        np.full(3, 1.3, dtype).tobytes()


@pytest.mark.parametrize("dtype", HALF, ids=str)
@pytest.mark.parametrize("integer", [zgrad.int64, zgrad.int32, zgrad.int16, zgrad.uint8], ids=str)
def test_half_to_integer_casts_truncate_toward_zero(dtype, integer):
    """As numpy's and PyTorch's casts: 2.75 -> 2, -2.75 -> -2 (Numba's float16-to-integer
    conversion on a GPU rounds to nearest; zgrad converts through float32)."""
    values = np.array([2.75, 2.5, 1.5, 0.75, -0.75, -1.5, -2.75, 7.0, 0.0], np.float32)
    if integer == zgrad.uint8:
        values = np.abs(values)
    host = zgrad.tensor(values.astype(dtype))
    device = host.to("cuda")
    np.testing.assert_array_equal(device.to(integer).cpu().numpy(), host.to(integer).numpy())
    np.testing.assert_array_equal(device.to(integer).cpu().numpy(), np.trunc(values).astype(integer))
    np.testing.assert_array_equal(device.long().cpu().numpy(), np.trunc(values).astype(np.int64))


def test_bfloat16_conversions_on_the_device_round_as_ml_dtypes():
    bits = np.random.default_rng(1).integers(0, 2 ** 32, 4096, dtype=np.uint64).astype(np.uint32)
    special = np.array([0, 0x80000000, 0x7F800000, 0xFF800000, 0x7FC00000, 0x7F800001, 0xFFFFFFFF, 0x3F808000,
                        0x3F818000, 0x7F7FFFFF, 0x00008000, 0x00018000], np.uint32)  # ±0, ±inf, NaNs, ties, overflow
    values = np.concatenate([bits, special]).view(np.float32)
    narrowed = zgrad.tensor(values).to("cuda").to(zgrad.bfloat16)
    want = values.astype(zgrad.bfloat16)
    got = narrowed.cpu().numpy()
    finite = ~np.isnan(values)
    assert got[finite].tobytes() == want[finite].tobytes()
    assert np.isnan(got[~finite].astype(np.float32)).all()
    widened = narrowed.to(zgrad.float32).cpu().numpy()
    np.testing.assert_array_equal(widened[finite], want[finite].astype(np.float32))
    assert narrowed.to(zgrad.float16).cpu().numpy()[finite].tobytes() == want[finite].astype(np.float16).tobytes()


CASES = {
    "add-broadcast": (lambda L, a, b: a + b, [(3, 4), (4,)]),
    "exp-mul": (lambda L, a: (a * 2).exp(), [(3, 4)]),
    "matmul": (lambda L, a, b: a @ b, [(5, 40), (40, 3)]),
    "sum": (lambda L, a: a.sum(1), [(4, 33)]),
    "var": (lambda L, a: a.var(1), [(4, 33)]),
    "logsumexp": (lambda L, a: a.logsumexp(1), [(4, 33)]),
    "max-dim": (lambda L, a: a.max(1).values, [(4, 33)]),
    "softmax": (lambda L, a: a.softmax(-1), [(4, 33)]),
    "layer_norm": (lambda L, a, w, b: _F(L).layer_norm(a, (8,), w, b), [(3, 8), (8,), (8,)]),
    "cross_entropy": (lambda L, a: _F(L).cross_entropy(a, L.tensor([0, 3, 1, 4])), [(4, 5)]),
    "conv2d": (lambda L, x, w: _F(L).conv2d(x, w, padding=1), [(1, 2, 5, 5), (3, 2, 3, 3)]),
    "gather": (lambda L, a: L.gather(a, 1, L.tensor([[0, 4], [1, 1], [3, 2], [0, 0]])), [(4, 5)]),
    "cumsum": (lambda L, a: a.cumsum(1), [(4, 9)]),
    "sort": (lambda L, a: L.sort(a, 1).values, [(4, 9)]),
}


@pytest.mark.parametrize("dtype", HALF, ids=str)
@pytest.mark.parametrize("fn, shapes", [pytest.param(fn, shapes, id=name) for name, (fn, shapes) in CASES.items()])
def test_ops_on_half_tensors_give_the_cpus_results(fn, shapes, dtype):
    rng = np.random.default_rng(0)
    arrays = [rng.uniform(-2, 2, size=s).astype(np.float32).astype(dtype) for s in shapes]
    check_device(fn, shapes, dtype=dtype, arrays=arrays)


@pytest.mark.parametrize("dtype", HALF, ids=str)
def test_argmax_of_half_tensors_on_the_device(dtype):
    host = np.random.default_rng(2).standard_normal((4, 33)).astype(dtype)
    device = zgrad.tensor(host).to("cuda")
    np.testing.assert_array_equal(device.argmax(1).cpu().numpy(), zgrad.tensor(host).argmax(1).numpy())


@pytest.mark.parametrize("dtype", HALF, ids=str)
def test_histc_of_half_tensors_on_the_device_finds_the_datas_range(dtype):
    host = zgrad.tensor(np.random.default_rng(3).standard_normal(50).astype(dtype))
    np.testing.assert_array_equal(host.cuda().histc(7).cpu().to(zgrad.float32).numpy(),
                                  host.histc(7).to(zgrad.float32).numpy())
    assert host.cuda()._data.max() == host._data.max().item()  # the device's extreme_value reads values, not bits
