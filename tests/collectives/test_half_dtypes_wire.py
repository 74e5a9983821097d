"""float16 and bfloat16 wherever tensors leave the process: collectives (summed in float32, one
rounding per step), DDP's fp16 and bf16 compression hooks, the RPC codec, the DataLoader's codec
and checkpoints (safetensors' F16 and BF16)."""

from __future__ import annotations

import msgpack
import numpy as np
import pytest

import zgrad
import zgrad.distributed as dist
from helpers import torch
from pg_harness import leftover_threads, pg_config, run_ranks
from test_data_codec import round_trip
from test_ddp import ddp_training, make_model, reference_training
from zgrad.distributed.algorithms.ddp_comm_hooks import default_hooks
from zgrad.distributed.rpc.codec import EXT_DTYPE, decode_value, encode_value
from zgrad.errors import ProtocolError
from zgrad.nn.parallel import DistributedDataParallel as DDP

HALF = [zgrad.float16, zgrad.bfloat16]


@pytest.fixture(autouse=True)
def no_leftover_threads():
    yield
    assert not leftover_threads(), f"process group threads still running: {leftover_threads()}"


@pytest.mark.parametrize("dtype", HALF, ids=str)
@pytest.mark.parametrize("algorithm", ["ring", "one_hop"])
def test_all_reduce_of_half_tensors_gives_every_rank_the_same_rounded_sum(dtype, algorithm):
    values = [np.random.default_rng(r).standard_normal(700).astype(dtype) for r in range(3)]
    settings = {"ring": {"chunk_kb": 1, "small_tensor_kb": 0}, "one_hop": {"chunk_kb": 1, "small_tensor_kb": 64}}

    def body(rank: int) -> np.ndarray:
        t = zgrad.tensor(values[rank].copy())
        dist.all_reduce(t)
        return t.numpy()

    results = run_ranks(3, body, "inproc", pg_config("inproc", **settings[algorithm]))
    wide = [v.astype(np.float64) for v in values]
    exact = wide[0] + wide[1] + wide[2]
    # two additions, each rounded once to the half dtype: an error of at most one eps of the operands
    bound = float(zgrad.finfo(dtype).eps) * (np.abs(wide[0]) + np.abs(wide[1]) + np.abs(wide[2]))
    for result in results:
        assert result.dtype == dtype
        np.testing.assert_array_equal(result, results[0])  # every rank the same bits
        assert np.all(np.abs(result.astype(np.float64) - exact) <= bound)


@pytest.mark.parametrize("dtype", HALF, ids=str)
def test_broadcast_and_all_gather_move_half_tensors_bit_for_bit(dtype):
    values = [np.random.default_rng(r).standard_normal(50).astype(dtype) for r in range(2)]

    def body(rank: int) -> tuple:
        t = zgrad.tensor(values[rank].copy())
        dist.broadcast(t, src=1)
        gathered = [zgrad.zeros(50, dtype=dtype) for _ in range(2)]
        dist.all_gather(gathered, zgrad.tensor(values[rank].copy()))
        return t.numpy(), [g.numpy() for g in gathered]

    for broadcast, gathered in run_ranks(2, body, "tcp"):
        assert broadcast.dtype == dtype and broadcast.tobytes() == values[1].tobytes()
        assert [g.tobytes() for g in gathered] == [v.tobytes() for v in values]


@pytest.mark.parametrize("hook, tolerance", [("fp16", 2e-3), ("bf16", 2e-2)])
def test_compression_hooks_train_as_the_uncompressed_reference(hook, tolerance):
    steps = 3
    want = reference_training(2, steps)

    def body(rank: int) -> list:
        model = DDP(make_model(), bucket_cap_mb=0.001)
        model.register_comm_hook(None, getattr(default_hooks, f"{hook}_compress_hook"))
        grads, _ = ddp_training(rank, 2, steps, model=model)
        return grads

    for grads in run_ranks(2, body, "tcp"):
        for step in range(steps):
            for g, w in zip(grads[step], want[step]):
                assert g.dtype == w.dtype  # the bucket is decompressed into the gradients' dtype
                np.testing.assert_allclose(g, w, rtol=0, atol=tolerance)
        # compression is lossy: the bf16 gradients differ from the reference, but not by more than bf16 rounds
        if hook == "bf16":
            assert any(not np.array_equal(g, w) for g, w in zip(grads[0], want[0]))


@pytest.mark.parametrize("dtype", HALF, ids=str)
def test_rpc_codec_carries_half_tensors_arrays_and_dtypes(dtype):
    tensor = zgrad.randn(3, 4).to(dtype).requires_grad_()
    array = np.arange(5).astype(dtype)
    encoded = encode_value([tensor, array, dtype])
    frames = [memoryview(np.ascontiguousarray(b).reshape(-1).view(np.uint8)) for b in encoded.buffers]
    back_tensor, back_array, back_dtype = decode_value(encoded.payload, frames).value
    assert back_tensor.dtype == dtype and back_tensor.requires_grad
    assert back_tensor.numpy().tobytes() == tensor.detach().numpy().tobytes()
    assert back_array.dtype == dtype and back_array.tobytes() == array.tobytes()
    assert back_dtype == dtype


def test_rpc_codec_refuses_a_raw_two_byte_void_dtype():
    payload = msgpack.packb(msgpack.ExtType(EXT_DTYPE, msgpack.packb("|V2")))
    with pytest.raises(ProtocolError, match="'|V2' is not a plain numeric dtype"):
        decode_value(payload)


@pytest.mark.parametrize("dtype", HALF, ids=str)
def test_dataloader_codec_carries_half_tensors_arrays_and_scalars(dtype):
    value = {"x": zgrad.randn(2, 3).to(dtype), "a": np.arange(4).astype(dtype), "s": np.arange(3).astype(dtype)[1]}
    back = round_trip(value)
    assert back["x"].dtype == dtype and back["x"].numpy().tobytes() == value["x"].numpy().tobytes()
    assert back["a"].dtype == dtype and back["a"].tobytes() == value["a"].tobytes()
    assert back["s"].dtype == dtype and back["s"] == value["s"]


@pytest.mark.parametrize("dtype, name", [(zgrad.float16, "F16"), (zgrad.bfloat16, "BF16")], ids=["F16", "BF16"])
def test_checkpoints_store_half_tensors_under_their_safetensors_names(tmp_path, dtype, name):
    import json
    import struct

    state = {"w": zgrad.randn(3, 5).to(dtype)}
    zgrad.save(state, tmp_path / "m.safetensors")
    raw = (tmp_path / "m.safetensors").read_bytes()
    header = json.loads(raw[8:8 + struct.unpack("<Q", raw[:8])[0]])
    assert header["w"]["dtype"] == name
    back = zgrad.load(tmp_path / "m.safetensors")
    assert back["w"].dtype == dtype and back["w"].numpy().tobytes() == state["w"].numpy().tobytes()


@pytest.mark.torch
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_half_checkpoints_load_in_torch_and_back(tmp_path, dtype):
    safetensors_torch = pytest.importorskip("safetensors.torch")
    ours = zgrad.randn(4, 3).to(getattr(zgrad, dtype))
    zgrad.save({"w": ours}, tmp_path / "ours.safetensors")
    theirs = safetensors_torch.load_file(tmp_path / "ours.safetensors")["w"]
    assert theirs.dtype == getattr(torch, dtype)
    np.testing.assert_array_equal(theirs.float().numpy(), ours.to(zgrad.float32).numpy())
    safetensors_torch.save_file({"w": theirs * 2}, tmp_path / "theirs.safetensors")
    back = zgrad.load(tmp_path / "theirs.safetensors")["w"]
    assert back.dtype == getattr(zgrad, dtype)
    np.testing.assert_array_equal(back.to(zgrad.float32).numpy(), (theirs * 2).float().numpy())
