"""The CUDA backend on a real GPU: streams per thread, pinned staging memory, the bandwidth the
launch configuration reaches, DLPack and the CUDA Array Interface with another framework.

Marked ``gpu`` and skipped without a GPU (and in Numba's simulator). On a machine with one, run
the whole CUDA suite on the device instead of the simulator with::

    ZGRAD_TEST_REAL_GPU=1 python -m pytest tests/kernels/test_cuda_*.py
"""

from __future__ import annotations

import threading

import numpy as np
import pytest

import zgrad
from cuda_helpers import requires_gpu
from zgrad.kernels import dispatch

pytestmark = requires_gpu


def _rt():
    return dispatch.backend("cuda").rt


def _torch_cuda():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch has no CUDA here")
    return torch


def test_each_thread_launches_on_its_own_stream_and_results_stay_right():
    rt = _rt()
    handles, results, errors = {}, {}, []
    data = np.random.default_rng(0).standard_normal((256, 256)).astype(np.float32)

    def work(i: int) -> None:
        try:
            handles[i] = int(rt.current_stream())
            x = zgrad.tensor(data * (i + 1), device="cuda")
            for _ in range(20):
                y = (x @ x.T).tanh().sum(1)
            results[i] = y.cpu().numpy()
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors, errors
    assert len(set(handles.values())) == 8 and 0 not in handles.values(), "one non-default stream per thread"
    for i in range(8):
        x = data * (i + 1)
        np.testing.assert_allclose(results[i], np.tanh(x @ x.T).sum(1), rtol=2e-4, atol=1e-3)


def test_staging_buffers_are_page_locked_and_reused():
    from cuda.bindings import driver
    pool = _rt().pinned_pool()
    leased = pool.lease((1 << 20,), np.float32)
    err, _flags = driver.cuMemHostGetFlags(leased.ctypes.data)
    assert err == driver.CUresult.CUDA_SUCCESS, f"a pool buffer is not pinned: {err}"
    err, _flags = driver.cuMemHostGetFlags(np.empty(1 << 20, np.float32).ctypes.data)
    assert err != driver.CUresult.CUDA_SUCCESS, "the check tells pageable memory from pinned"
    address = leased.ctypes.data
    del leased
    again = pool.lease((1 << 20,), np.float32)
    assert again.ctypes.data == address, "the buffer came back to the pool and was handed out again"


def test_copies_reach_a_fair_share_of_the_peak_bandwidth():
    """Catches a launch configuration that leaves the GPU idle (one block, a tiny grid): a copy of
    256 MiB must move at least a quarter of the memory's peak; a tuned copy reaches 80-90%."""
    rt = _rt()
    backend = dispatch.backend("cuda")
    peak = backend.device_properties()["peak_gb_s"]
    assert peak and peak > 100, f"implausible peak bandwidth {peak} GB/s from the driver's attributes"
    n = 64 << 20
    a, out = backend.empty((n,), np.float32), backend.empty((n,), np.float32)
    backend.copy(backend.full((n,), 1.0, np.float32), a)
    backend.copy(a, out)
    ms = min(rt.elapsed_ms(lambda: backend.copy(a, out), repeat=10) for _ in range(3))
    achieved = 2 * 4 * n / (ms * 1e-3) / 1e9
    assert achieved >= 0.25 * peak, f"copy moved {achieved:.0f} GB/s of a {peak:.0f} GB/s peak"


@pytest.mark.torch
def test_dlpack_round_trips_with_torch_without_copies():
    torch = _torch_cuda()
    x = zgrad.arange(12, dtype=zgrad.float32, device="cuda").reshape(3, 4)
    t = torch.from_dlpack(x)
    assert t.is_cuda and t.shape == (3, 4) and t.dtype == torch.float32
    assert t.data_ptr() == x.__cuda_array_interface__["data"][0]
    t.mul_(2)  # shared memory: zgrad sees torch's write
    torch.cuda.synchronize()
    np.testing.assert_array_equal(x.cpu().numpy(), np.arange(12, dtype=np.float32).reshape(3, 4) * 2)

    source = torch.arange(20, dtype=torch.float64, device="cuda").reshape(4, 5)[:, 1::2]
    y = zgrad.from_dlpack(source)
    assert y.is_cuda and y.shape == (4, 2) and y.dtype == zgrad.float64
    np.testing.assert_array_equal(y.cpu().numpy(), source.cpu().numpy())
    source.add_(1)
    torch.cuda.synchronize()
    np.testing.assert_array_equal((y * 1).cpu().numpy(), source.cpu().numpy())


@pytest.mark.torch
def test_memory_shared_with_torch_is_never_a_sole_view():
    torch = _torch_cuda()
    x = zgrad.ones(8, device="cuda")
    exported = torch.from_dlpack(x)  # the export holds x's array: not a sole view while it lives
    assert not x._data.is_sole_view()
    del exported
    assert x._data.is_sole_view()
    imported = zgrad.from_dlpack(torch.ones(8, device="cuda"))  # torch's memory: never zgrad's to keep
    assert not imported._data.is_sole_view()


@pytest.mark.torch
def test_the_cuda_array_interface_is_read_by_torch():
    torch = _torch_cuda()
    x = zgrad.ones(5, device="cuda") * 3
    zgrad.cuda.synchronize()
    t = torch.as_tensor(x, device="cuda")
    assert t.data_ptr() == x.__cuda_array_interface__["data"][0]
    assert t.tolist() == [3.0] * 5


@pytest.mark.parametrize("shape, axis", [((3_000_001,), None), ((3, 1 << 17), 1), ((1 << 16, 4), 0)])
def test_long_rows_sum_across_the_whole_gpu(shape, axis):
    data = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
    x = zgrad.tensor(data, device="cuda")
    total = x.sum() if axis is None else x.sum(axis)
    np.testing.assert_allclose(total.cpu().numpy(), data.astype(np.float64).sum(axis), rtol=1e-4, atol=1e-2)


def test_a_training_step_on_the_gpu_matches_the_cpu():
    """In float64, which cuBLAS computes as OpenBLAS does up to the order of the sums: in float32
    those orders differ by an ulp, and three Adam steps blow that up wherever a gradient is near 0."""
    zgrad.manual_seed(0)
    cpu_model = zgrad.nn.Sequential(zgrad.nn.Linear(64, 128), zgrad.nn.ReLU(), zgrad.nn.Linear(128, 10)).double()
    import copy
    gpu_model = copy.deepcopy(cpu_model).to("cuda")
    x = zgrad.randn(32, 64, dtype=zgrad.float64)
    target = zgrad.tensor(np.arange(32) % 10)
    for model, data, labels in ((cpu_model, x, target), (gpu_model, x.cuda(), target.cuda())):
        optimizer = zgrad.optim.Adam(model.parameters(), lr=1e-2)
        for _ in range(3):
            optimizer.zero_grad()
            zgrad.nn.functional.cross_entropy(model(data), labels).backward()
            optimizer.step()
    for p, q in zip(cpu_model.parameters(), gpu_model.parameters()):
        np.testing.assert_allclose(q.cpu().numpy(), p.numpy(), rtol=1e-7, atol=1e-9)
