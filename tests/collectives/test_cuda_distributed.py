"""CUDA tensors over RPC and collectives (Numba's simulator here): staged through pinned host
buffers of the CUDA backend's pool, their device in the metadata, placed on the receiver's device."""

from __future__ import annotations

import collections
import gc

import numpy as np
import pytest

import rpc_targets as T
import zgrad
import zgrad.distributed as dist
from cuda_helpers import is_device_array, requires_cuda
from pg_harness import run_ranks
from rpc_harness import make_config, run_workers
from zgrad.distributed import rpc
from zgrad.distributed.rpc.codec import decode_value, encode_value
from zgrad.errors import ProtocolError, ZgradError
from zgrad.kernels import dispatch
from zgrad.kernels.cuda import runtime as cuda_runtime

pytestmark = requires_cuda


def _frames(encoded):
    return [memoryview(b).cast("B") for b in encoded.buffers]


def test_a_cuda_tensor_travels_through_a_pinned_buffer_and_lands_on_cuda():
    pool = cuda_runtime.pinned_pool()
    x = zgrad.tensor([[1.0, 2.0], [3.0, 4.0]], device="cuda", requires_grad=True)
    encoded = encode_value([x, zgrad.ones(2)])
    assert all(isinstance(b, np.ndarray) for b in encoded.buffers)
    cached_before = pool.cached_bytes
    decoded = decode_value(encoded.payload, _frames(encoded))
    y, plain = decoded.value
    assert y.is_cuda and is_device_array(y._data) and y.requires_grad and not plain.is_cuda
    np.testing.assert_array_equal(y.cpu().numpy(), [[1.0, 2.0], [3.0, 4.0]])
    del encoded, decoded
    gc.collect()
    assert pool.cached_bytes > cached_before, "the staging buffer goes back to the pool once the transport is done"


def test_a_cuda_parameter_stays_a_parameter():
    p = zgrad.nn.Parameter(zgrad.ones(3, device="cuda"))
    encoded = encode_value(p)
    q = decode_value(encoded.payload, _frames(encoded)).value
    assert isinstance(q, zgrad.nn.Parameter) and q.is_cuda and q.requires_grad


def test_a_cuda_tensor_at_a_worker_without_cuda_is_an_error(monkeypatch):
    encoded = encode_value(zgrad.ones(2, device="cuda"))
    monkeypatch.setattr(dispatch, "backend_available", lambda device_type: False)
    with pytest.raises(ZgradError, match="received a tensor on cuda:0, but this worker has no CUDA device"):
        decode_value(encoded.payload, _frames(encoded))


def test_an_unknown_device_in_a_tensor_reference_is_a_protocol_error():
    import msgpack
    from zgrad.distributed.rpc.codec import EXT_TENSOR
    bad = msgpack.packb(msgpack.ExtType(EXT_TENSOR, msgpack.packb([0, "<f4", [1], False, False, "tpu:0"])))
    with pytest.raises(ProtocolError, match="malformed tensor reference"):
        decode_value(bad, [memoryview(np.ones(1, np.float32)).cast("B")])


def test_rpc_sync_with_cuda_tensors():
    def body(rank):
        if rank == 0:
            a = zgrad.tensor([1.0, 2.0, 3.0], device="cuda")
            result = rpc.rpc_sync("worker1", T.add, args=(a, a))
            return result.is_cuda, result.cpu().tolist()
        return None

    is_cuda, values = run_workers(2, make_config("inproc", 2), body)[0]
    assert is_cuda and values == [2.0, 4.0, 6.0]


def test_collectives_on_cuda_tensors():
    def body(rank):
        x = zgrad.tensor(np.arange(6, dtype=np.float32) * (rank + 1), device="cuda")
        dist.all_reduce(x)
        gathered = [zgrad.zeros(2, device="cuda") for _ in range(2)]
        dist.all_gather(gathered, zgrad.full((2,), float(rank), device="cuda"))
        b = zgrad.full((3,), float(rank + 5), device="cuda")
        dist.broadcast(b, src=1)
        work = dist.all_reduce(x, op=dist.ReduceOp.MAX, async_op=True)
        work.wait()
        return [t.is_cuda for t in (x, *gathered, b)], x.cpu().tolist(), [g.cpu().tolist() for g in gathered], b.cpu().tolist()

    for on_cuda, reduced, gathered, broadcast in run_ranks(2, body, "inproc"):
        assert all(on_cuda)
        assert reduced == [0.0, 3.0, 6.0, 9.0, 12.0, 15.0]
        assert gathered == [[0.0, 0.0], [1.0, 1.0]] and broadcast == [6.0, 6.0, 6.0]


def test_a_device_map_sends_cuda_tensors_to_the_peers_cpu_and_results_come_back_to_cuda():
    def body(rank):
        if rank == 0:
            a = zgrad.tensor([1.0, 2.0], device="cuda")
            seen = rpc.rpc_sync("worker1", T.device_of, args=(a,))
            result = rpc.rpc_sync("worker1", T.add, args=(a, a))
            unmapped = rpc.rpc_sync("worker2", T.add, args=(a, a))
            return seen, result.is_cuda, result.cpu().tolist(), unmapped.is_cuda
        return None

    config = make_config("inproc", 3, rpc={"device_maps": {"worker1": {"cuda:0": "cpu"}}})
    seen, result_on_cuda, values, unmapped_on_cuda = run_workers(3, config, body)[0]
    assert seen == "cpu", seen
    assert result_on_cuda and values == [2.0, 4.0], "the reply travels the inverse map: the peer's CPU -> cuda:0"
    assert unmapped_on_cuda, "without a map a CUDA tensor lands on the receiver's CUDA device"


def test_set_device_map_on_the_backend_options_maps_cpu_tensors_onto_the_peers_cuda():
    options = rpc.TensorPipeRpcBackendOptions()
    options.set_device_map("worker1", {"cpu": 0})
    assert options.device_maps == {"worker1": {"cpu": "cuda:0"}}

    def body(rank):
        rpc.init_rpc(f"worker{rank}", rank=rank, world_size=2, config=make_config("inproc", 2),
                     rpc_backend_options=options if rank == 0 else None)
        try:
            if rank == 0:
                result = rpc.rpc_sync("worker1", T.add, args=(zgrad.ones(2), zgrad.ones(2)))
                return str(rpc.rpc_sync("worker1", T.device_of, args=(zgrad.ones(1),))), result.is_cuda
            return None
        finally:
            rpc.shutdown()

    import threading
    results = [None, None]
    threads = [threading.Thread(target=lambda r=r: results.__setitem__(r, body(r))) for r in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    seen, result_on_cuda = results[0]
    assert seen.startswith("cuda") and not result_on_cuda, (seen, "the reply's CUDA tensor comes back to the CPU")


@pytest.mark.parametrize("device_maps", [{}, {"worker1": {"cuda:0": "cpu"}}], ids=["cuda_to_cuda", "cuda_to_cpu"])
def test_a_distributed_backward_through_cuda_tensors(device_maps):
    from zgrad.distributed import autograd as dist_autograd

    def body(rank):
        if rank != 0:
            return None
        with dist_autograd.context() as context_id:
            a = zgrad.tensor([[1.0, 2.0], [3.0, 4.0]], device="cuda", requires_grad=True)
            b = zgrad.tensor([[0.5, 0.5], [1.0, 2.0]], device="cuda", requires_grad=True)
            c = rpc.rpc_sync("worker1", T.mul, args=(a, b))
            loss = (c * c.detach()).sum()
            dist_autograd.backward(context_id, [loss])
            grads = dist_autograd.get_gradients(context_id)
            return [(grads[t].is_cuda, grads[t].cpu().tolist()) for t in (a, b)], c.is_cuda

    config = make_config("inproc", 2, rpc={"device_maps": device_maps})
    (grad_a, grad_b), c_on_cuda = run_workers(2, config, body)[0]
    a, b = np.array([[1.0, 2.0], [3.0, 4.0]]), np.array([[0.5, 0.5], [1.0, 2.0]])
    c = a * b
    assert c_on_cuda and grad_a[0] and grad_b[0], "results and gradients on the devices of the tensors"
    np.testing.assert_allclose(grad_a[1], c * b)
    np.testing.assert_allclose(grad_b[1], c * a)


@pytest.mark.parametrize("as_view", [False, True], ids=["copy", "bucket_view"])
def test_ddp_on_cuda_averages_as_on_the_cpu(as_view):
    from zgrad.nn.parallel import DistributedDataParallel as DDP

    def train(device):
        def body(rank):
            model = zgrad.nn.Sequential(zgrad.nn.Linear(4, 8), zgrad.nn.ReLU(), zgrad.nn.Linear(8, 2))
            # Values from a generator of this rank's own (the ranks are threads of one process, and
            # zgrad's seed is the process's): a different model per rank, DDP broadcasts rank 0's.
            rng = np.random.default_rng(10 + rank)
            with zgrad.no_grad():
                for p in model.parameters():
                    p.copy_(zgrad.tensor(rng.standard_normal(p.shape).astype(np.float32)))
            model = model.to(device)
            ddp = DDP(model, bucket_cap_mb=1e-4, gradient_as_bucket_view=as_view)
            optimizer = zgrad.optim.SGD(ddp.parameters(), lr=0.1)
            data = np.random.default_rng(rank).standard_normal((6, 4)).astype(np.float32)
            for _ in range(2):
                optimizer.zero_grad()
                (ddp(zgrad.tensor(data, device=device)) ** 2).sum().backward()
                optimizer.step()
            return [(p.is_cuda, p.grad.is_cuda, p.detach().cpu().numpy()) for p in model.parameters()]
        return run_ranks(2, body, "inproc")

    on_cuda, on_cpu = train("cuda"), train("cpu")
    for rank in range(2):
        for (param_cuda, grad_cuda, value), (_, _, expected) in zip(on_cuda[rank], on_cpu[rank]):
            assert param_cuda and grad_cuda
            np.testing.assert_allclose(value, expected, rtol=1e-5, atol=1e-6)
    for a, b in zip(on_cuda[0], on_cuda[1]):
        np.testing.assert_allclose(a[2], b[2], rtol=1e-6), "the ranks stay in step"


def test_ddp_takes_the_device_of_a_module_on_one_gpu_and_moves_the_inputs_there():
    from zgrad.nn.parallel import DistributedDataParallel as DDP

    class Pair(zgrad.nn.Module):
        def __init__(self):
            super().__init__()
            self.linear = zgrad.nn.Linear(3, 2)

        def forward(self, pair, scale=None):
            assert type(scale) is collections.OrderedDict, "a dict's class is kept"
            return self.linear(pair[0] + pair[1]) * scale["by"]

    def body(rank):
        model = Pair().to(0)
        ddp = DDP(model, device_ids=[0])
        assert (ddp.device_ids, ddp.output_device) == ([0], 0)
        out = ddp((zgrad.ones(4, 3), zgrad.ones(4, 3)), scale=collections.OrderedDict(by=zgrad.tensor(2.0)))  # on the CPU
        out.sum().backward()
        assert out.is_cuda and model.linear.weight.grad.is_cuda
        explicit = DDP(model, device_ids=[zgrad.device("cuda:0")], output_device="cuda:0")
        assert (explicit.device_ids, explicit.output_device) == ([0], 0)
        with pytest.raises(ValueError, match=r"^device_ids can only be None or contain a single element\.$"):
            DDP(model, device_ids=[0, 0])
        with pytest.raises(ZgradError, match=r"invalid device ordinal: cuda:1 requested"):
            DDP(model, device_ids=[1])
        mixed = zgrad.nn.Sequential(zgrad.nn.Linear(2, 2), zgrad.nn.Linear(2, 2).to("cuda"))
        with pytest.raises(ValueError, match=r"DistributedDataParallel's input module must be on the same type of "
                                             r"devices, but input module parameters locate in \{.*'cpu'.*\}\."):
            DDP(mixed)

    run_ranks(1, body, "inproc")


def test_a_cuda_tensor_at_a_worker_without_cuda_fails_that_call_and_the_worker_keeps_serving(monkeypatch):
    def body(rank):
        if rank != 0:
            return None
        a = zgrad.ones(2, device="cuda")
        # From here no worker of this process "has" a CUDA device: worker1 cannot place a.
        monkeypatch.setattr(dispatch, "backend_available", lambda device_type: device_type == "cpu")
        with pytest.raises(Exception, match="received a tensor on cuda:0, but this worker has no CUDA device"):
            rpc.rpc_sync("worker1", T.add, args=(a, a))
        return rpc.rpc_sync("worker1", T.add, args=(zgrad.ones(2), zgrad.ones(2))).tolist()

    assert run_workers(2, make_config("inproc", 2), body)[0] == [2.0, 2.0]
