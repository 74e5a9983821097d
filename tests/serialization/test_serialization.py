"""``zgrad.save`` / ``zgrad.load``: round trips of every kind of value through paths and file
objects, the safetensors layout (read by the safetensors package, and files it wrote read by
zgrad), ``map_location``, and the errors for files that are not checkpoints, are truncated or
hold a dtype zgrad lacks, and for values a checkpoint cannot hold."""

from __future__ import annotations

import io
import json
import math
import struct
from collections import OrderedDict, namedtuple
from pathlib import Path

import numpy as np
import pytest

import zgrad
from helpers import torch
from zgrad import nn
from zgrad.errors import CheckpointError

safetensors_numpy = pytest.importorskip("safetensors.numpy")


def assert_same(got, want, where="obj"):
    """``got`` is ``want``'s equal: same types all the way down, tensors of the same class, dtype,
    values and requires_grad, NaN equal to NaN."""
    assert type(got) is type(want), f"{where}: {type(got).__name__} != {type(want).__name__}"
    if isinstance(want, zgrad.Tensor):
        assert got.dtype == want.dtype and got.shape == want.shape and got.requires_grad == want.requires_grad, where
        assert got.device == want.device, where
        np.testing.assert_array_equal(got.cpu().numpy(), want.detach().cpu().numpy(), err_msg=where)
    elif isinstance(want, np.ndarray):
        assert got.dtype == want.dtype, where
        np.testing.assert_array_equal(got, want, err_msg=where)
    elif isinstance(want, dict):
        assert list(got) == list(want), where
        for k in want:
            assert_same(got[k], want[k], f"{where}[{k!r}]")
    elif isinstance(want, (list, tuple)):
        assert len(got) == len(want), where
        for i, (g, w) in enumerate(zip(got, want)):
            assert_same(g, w, f"{where}[{i}]")
    elif isinstance(want, float) and math.isnan(want):
        assert math.isnan(got), where
    else:
        assert got == want, where


def every_kind_of_value() -> dict:
    base = zgrad.arange(12, dtype=zgrad.float64).reshape(3, 4)
    return {
        "MODEL_STATE": nn.Linear(4, 3).state_dict(),
        "EPOCHS_RUN": 3,
        "numbers": [0, -1, 2**70, 1.5, -0.0, 1e-300, math.inf, -math.inf, math.nan, True, False, None],
        "strings": ["", "plain", "ünïcødé ✓", 'quotes " and \\ and \n'],
        "nested": {"a": [(1, 2.0), {"b": ()}, []], "empty": {}},
        "int keys": {0: "zero", 1: {"step": zgrad.tensor(3.0)}, -5: None},
        "other keys": {(1, "a"): 1, 2.5: "float key", True: "bool key", None: "none key"},
        "dtypes": [zgrad.float32, zgrad.int64, np.dtype(np.uint8)],
        "tensors": [zgrad.tensor(1.5), zgrad.zeros(0, 3), zgrad.tensor([True, False]),
                    zgrad.tensor([1, 2], dtype=zgrad.int32), zgrad.tensor([7], dtype=zgrad.uint8),
                    zgrad.tensor([1.0, 2.0], dtype=zgrad.float16), base.t(), base[1:, ::2]],
        "requires grad": zgrad.ones(2, requires_grad=True),
        "parameter": nn.Parameter(zgrad.ones(2, 2)),
        "frozen parameter": nn.Parameter(zgrad.ones(1), requires_grad=False),
        "arrays": [np.arange(5, dtype=np.int16), np.zeros((2, 0)), np.array(3.0), np.arange(4, dtype=">f8"),
                   np.array([1, 2], dtype=np.uint64)],
        "numpy scalars": [np.float32(0.5), np.int64(7), np.bool_(True)],
    }


def expected_after_load(obj):
    """What a value becomes: dict subclasses come back as dicts, numpy scalars as Python numbers,
    big-endian arrays as little-endian ones."""
    if isinstance(obj, dict):
        return {k: expected_after_load(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(expected_after_load(v) for v in obj)
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, np.ndarray) and obj.dtype.byteorder == ">":
        return obj.astype(obj.dtype.newbyteorder("<"))
    if isinstance(obj, zgrad.Tensor) and not obj.is_contiguous():
        return zgrad.Tensor(np.ascontiguousarray(obj.numpy()))
    return obj


class FsspecLikeFile:
    """A file object with read, write, seek and tell, and no readinto (as some fsspec files)."""

    def __init__(self) -> None:
        self._buffer = io.BytesIO()
        self.path = "memory://bucket/ckpt.safetensors"

    def write(self, data):
        return self._buffer.write(data)

    def read(self, count=-1):
        return self._buffer.read(count)

    def seek(self, offset, whence=0):
        return self._buffer.seek(offset, whence)

    def tell(self):
        return self._buffer.tell()


@pytest.mark.parametrize("target", ["str", "pathlike", "bytesio", "open file", "fsspec-like"])
def test_every_kind_of_value_round_trips(target, tmp_path):
    obj = every_kind_of_value()
    path = tmp_path / "checkpoint.pt"
    if target in ("str", "pathlike"):
        f = str(path) if target == "str" else path
        zgrad.save(obj, f)
        got = zgrad.load(f)
    elif target == "open file":
        with open(path, "wb") as out:
            zgrad.save(obj, out)
        with open(path, "rb") as src:
            got = zgrad.load(src)
    else:
        buffer = io.BytesIO() if target == "bytesio" else FsspecLikeFile()
        zgrad.save(obj, buffer)
        buffer.seek(0)
        got = zgrad.load(buffer)
    assert_same(got, expected_after_load(obj))


def test_weights_only_false_loads_the_same(tmp_path):
    obj = {"w": zgrad.randn(3), "n": 1}
    zgrad.save(obj, tmp_path / "c.pt")
    assert_same(zgrad.load(tmp_path / "c.pt", weights_only=False), zgrad.load(tmp_path / "c.pt", weights_only=True))


def test_a_tensor_met_twice_comes_back_as_one_object_and_views_keep_their_values(tmp_path):
    shared = zgrad.randn(4)
    base = zgrad.randn(4, 4)
    zgrad.save({"a": shared, "b": [shared], "row": base[1], "whole": base}, tmp_path / "c.pt")
    got = zgrad.load(tmp_path / "c.pt")
    assert got["a"] is got["b"][0]
    np.testing.assert_array_equal(got["row"].numpy(), base[1].numpy())
    got["whole"][1] = 0  # views of one base are saved as separate tensors: no sharing after a load
    np.testing.assert_array_equal(got["row"].numpy(), base[1].numpy())


def test_tensor_names_are_paths_and_a_state_dict_loads_into_a_module(tmp_path):
    zgrad.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
    zgrad.save({"MODEL_STATE": model.state_dict(), "EPOCHS_RUN": 2, "layers": [zgrad.ones(1)],
                "clash.x": zgrad.ones(1), "clash": {"x": zgrad.zeros(1)}}, tmp_path / "snapshot.pt")
    names = set(safetensors_numpy.load_file(tmp_path / "snapshot.pt"))
    assert names == {"MODEL_STATE.0.weight", "MODEL_STATE.0.bias", "MODEL_STATE.2.weight", "MODEL_STATE.2.bias",
                     "layers.0", "clash.x", "clash.x#1"}
    snapshot = zgrad.load(tmp_path / "snapshot.pt")
    fresh = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
    fresh.load_state_dict(snapshot["MODEL_STATE"])
    x = zgrad.randn(5, 3)
    np.testing.assert_array_equal(fresh(x).detach().numpy(), model(x).detach().numpy())
    assert snapshot["clash.x"].item() == 1 and snapshot["clash"]["x"].item() == 0


def test_a_module_state_dict_saved_alone_is_a_plain_safetensors_model_file(tmp_path):
    model = nn.Linear(3, 2)
    zgrad.save(model.state_dict(), tmp_path / "model.safetensors")
    arrays = safetensors_numpy.load_file(tmp_path / "model.safetensors")
    assert list(sorted(arrays)) == ["bias", "weight"]
    np.testing.assert_array_equal(arrays["weight"], model.weight.detach().numpy())


def test_ordered_dicts_come_back_as_dicts_in_order(tmp_path):
    zgrad.save(OrderedDict([("b", 1), ("a", 2)]), tmp_path / "c.pt")
    got = zgrad.load(tmp_path / "c.pt")
    assert type(got) is dict and list(got.items()) == [("b", 1), ("a", 2)]


@pytest.mark.torch
def test_the_safetensors_package_reads_a_zgrad_checkpoint(tmp_path):
    safetensors_torch = pytest.importorskip("safetensors.torch")
    obj = every_kind_of_value()
    zgrad.save(obj, tmp_path / "c.pt")
    by_numpy = safetensors_numpy.load_file(tmp_path / "c.pt")
    by_torch = safetensors_torch.load_file(tmp_path / "c.pt")
    assert set(by_numpy) == set(by_torch)
    np.testing.assert_array_equal(by_numpy["MODEL_STATE.weight"], obj["MODEL_STATE"]["weight"].numpy())
    np.testing.assert_array_equal(by_torch["int keys.1.step"].numpy(), np.float32(3.0))
    np.testing.assert_array_equal(by_numpy["arrays.0"], np.arange(5, dtype=np.int16))
    assert by_torch["tensors.6"].is_contiguous() and by_torch["tensors.6"].shape == torch.Size([4, 3])
    np.testing.assert_array_equal(by_torch["tensors.6"].numpy(), obj["tensors"][6].numpy())


def test_zgrad_reads_a_safetensors_file_it_did_not_write(tmp_path):
    arrays = {"b.weight": np.arange(6, dtype=np.float32).reshape(2, 3), "a": np.array([1, 2], dtype=np.int64),
              "flag": np.array([True])}
    safetensors_numpy.save_file(arrays, tmp_path / "model.safetensors", metadata={"format": "pt"})
    got = zgrad.load(tmp_path / "model.safetensors")
    assert list(got) == ["a", "b.weight", "flag"]
    for name, array in arrays.items():
        assert isinstance(got[name], zgrad.Tensor) and not got[name].requires_grad
        np.testing.assert_array_equal(got[name].numpy(), array)


def test_the_header_is_aligned_and_tensors_start_at_their_item_size(tmp_path):
    zgrad.save({"byte": zgrad.tensor([1], dtype=zgrad.uint8), "double": zgrad.ones(3, dtype=zgrad.float64),
                "float": zgrad.ones(5)}, tmp_path / "c.pt")
    raw = (tmp_path / "c.pt").read_bytes()
    (length,) = struct.unpack("<Q", raw[:8])
    assert (8 + length) % 8 == 0
    header = json.loads(raw[8:8 + length])
    for name, info in header.items():
        if name != "__metadata__":
            itemsize = {"U8": 1, "F64": 8, "F32": 4}[info["dtype"]]
            assert info["data_offsets"][0] % itemsize == 0, name
    assert header["__metadata__"]["zgrad.format"] == "1"


# --- map_location --------------------------------------------------------------------------------


@pytest.fixture
def cuda_checkpoint(tmp_path):
    if not zgrad.cuda.is_available():
        pytest.skip("no CUDA backend here (install zgrad[cuda]; tests use the simulator)")
    path = tmp_path / "cuda.pt"
    zgrad.save({"gpu": zgrad.arange(3, dtype=zgrad.float32).cuda(), "host": zgrad.ones(2)}, path)
    return path


def test_cuda_tensors_come_back_on_cuda_and_map_location_moves_them(cuda_checkpoint):
    got = zgrad.load(cuda_checkpoint)
    assert got["gpu"].is_cuda and not got["host"].is_cuda
    assert got["gpu"].tolist() == [0.0, 1.0, 2.0]
    for location in ("cpu", zgrad.device("cpu"), {"cuda:0": "cpu"}, lambda storage, loc: storage):
        moved = zgrad.load(cuda_checkpoint, map_location=location)
        assert not moved["gpu"].is_cuda and moved["gpu"].tolist() == [0.0, 1.0, 2.0], location
    everything = zgrad.load(cuda_checkpoint, map_location="cuda")
    assert everything["gpu"].is_cuda and everything["host"].is_cuda
    seen = []
    zgrad.load(cuda_checkpoint, map_location=lambda storage, loc: seen.append((storage.device.type, loc)))
    assert sorted(seen) == [("cpu", "cpu"), ("cpu", "cuda:0")]


def test_a_cuda_checkpoint_without_cuda_says_to_map_it_to_the_cpu(cuda_checkpoint, monkeypatch):
    from zgrad.kernels import dispatch
    monkeypatch.setattr(dispatch, "backend_available", lambda device_type: device_type == "cpu")
    with pytest.raises(zgrad.ZgradError, match="(?s)cuda.pt.*saved on cuda:0 but CUDA is not available.*"
                                                "map_location='cpu'"):
        zgrad.load(cuda_checkpoint)
    assert not zgrad.load(cuda_checkpoint, map_location="cpu")["gpu"].is_cuda


def test_map_location_of_a_cpu_checkpoint(tmp_path):
    zgrad.save({"w": zgrad.ones(2)}, tmp_path / "c.pt")
    assert zgrad.load(tmp_path / "c.pt", map_location={"cuda:0": "cpu"})["w"].tolist() == [1.0, 1.0]
    doubled = zgrad.load(tmp_path / "c.pt", map_location=lambda storage, loc: storage * 2)
    assert doubled["w"].tolist() == [2.0, 2.0]
    with pytest.raises(TypeError, match="map_location should be None, a device, a device string, a dict or a "
                                        "callable, got int"):
        zgrad.load(tmp_path / "c.pt", map_location=0)
    with pytest.raises(TypeError, match="map_location returned a str for a tensor saved on cpu"):
        zgrad.load(tmp_path / "c.pt", map_location=lambda storage, loc: "cpu")


# --- what cannot be saved ------------------------------------------------------------------------


Point = namedtuple("Point", "x y")


@pytest.mark.parametrize("obj, message", [
    ({"model": nn.Linear(2, 2)}, r"cannot store a Linear object at obj\['model'\].*save its state_dict\(\) instead"),
    ({"schedule": [lambda epoch: 0.9]}, r"cannot store a lambda at obj\['schedule'\]\[0\]"),
    ({"optimizer": zgrad.optim.SGD([zgrad.ones(1, requires_grad=True)], lr=0.1)},
     r"cannot store a SGD object at obj\['optimizer'\].*state_dict\(\)"),
    ({"p": Point(1, 2)}, r"cannot store the namedtuple Point at obj\['p'\].*_asdict\(\)"),
    ({"s": {1, 2}}, r"cannot store a set object at obj\['s'\]"),
    ({"c": [np.array([1 + 2j])]}, r"cannot store the ndarray of dtype complex128 at obj\['c'\]\[0\]"),
    ({"b": b"bytes"}, r"cannot store a bytes object at obj\['b'\]"),
    ({zgrad.ones(1): 1}, r"cannot store a Tensor as a dict key at obj"),
])
def test_values_a_checkpoint_cannot_hold_are_a_type_error_naming_their_place(obj, message, tmp_path):
    path = tmp_path / "c.pt"
    path.write_bytes(b"old")
    with pytest.raises(TypeError, match=message):
        zgrad.save(obj, path)
    assert path.read_bytes() == b"old" and list(tmp_path.iterdir()) == [path]


def test_a_container_that_contains_itself_is_refused():
    loop = {"a": []}
    loop["a"].append(loop)
    with pytest.raises(ValueError, match=r"the dict at obj\['a'\]\[0\] contains itself"):
        zgrad.save(loop, io.BytesIO())


def test_saving_into_a_missing_directory(tmp_path):
    with pytest.raises(RuntimeError, match=f"Parent directory {tmp_path / 'missing'} does not exist"):
        zgrad.save({}, tmp_path / "missing" / "c.pt")


# --- files that are not checkpoints ---------------------------------------------------------------


@pytest.fixture
def checkpoint_bytes() -> bytes:
    buffer = io.BytesIO()
    zgrad.save({"w": zgrad.arange(64, dtype=zgrad.float64), "epoch": 1}, buffer)
    return buffer.getvalue()


@pytest.mark.torch
@pytest.mark.parametrize("zip_format", [True, False], ids=["zip", "legacy-pickle"])
def test_a_pytorch_checkpoint_is_named_as_one_with_the_way_to_convert_it(tmp_path, zip_format):
    if torch is None:
        pytest.skip("torch is not installed")
    path = tmp_path / "model.pt"
    torch.save({"w": torch.ones(2)}, path, _use_new_zipfile_serialization=zip_format)
    with pytest.raises(CheckpointError, match=r"model.pt' looks like a PyTorch checkpoint .* never unpickles a file\. "
                                              r"Convert the state_dict once where PyTorch runs: safetensors\.torch"):
        zgrad.load(path)


def test_a_safetensors_file_whose_length_starts_as_a_pickle_does_loads(tmp_path):
    """A 640-byte header is announced by the bytes 80 02 00 ...: a pickle's start, but a valid length."""
    path = tmp_path / "w.safetensors"
    for n in range(1, 200):
        zgrad.save({"w" * n: zgrad.ones(2)}, path)
        if path.read_bytes()[:2] == b"\x80\x02":
            break
    else:
        pytest.skip("no header of 640 bytes among the names tried")
    assert zgrad.load(path)["w" * n].tolist() == [1.0, 1.0]


def test_a_file_that_is_not_a_checkpoint(tmp_path):
    text = tmp_path / "notes.txt"
    text.write_text("these are not the tensors you are looking for\n" * 3)
    with pytest.raises(CheckpointError, match=r"'.*notes.txt' is not a safetensors checkpoint: its first 8 bytes "
                                              r"announce a \d+-byte header"):
        zgrad.load(text)
    tiny = tmp_path / "tiny"
    tiny.write_bytes(b"abc")
    with pytest.raises(CheckpointError, match="tiny' is not a checkpoint: it holds 3 bytes"):
        zgrad.load(tiny)
    not_json = tmp_path / "not_json"
    not_json.write_bytes(struct.pack("<Q", 4) + b"\xff\xfe{}")
    with pytest.raises(CheckpointError, match="not_json' is not a safetensors checkpoint: its header is not UTF-8 JSON"):
        zgrad.load(not_json)
    a_list = tmp_path / "a_list"
    a_list.write_bytes(struct.pack("<Q", 8) + b"[1,2,3] ")
    with pytest.raises(CheckpointError, match="its header is a JSON list, not an object"):
        zgrad.load(a_list)


@pytest.mark.parametrize("cut", [4, 8, 20, -200, -1])
def test_a_truncated_file_names_the_file_and_what_is_missing(cut, checkpoint_bytes, tmp_path):
    path = tmp_path / "torn.pt"
    path.write_bytes(checkpoint_bytes[:cut])
    with pytest.raises(CheckpointError, match=r"torn.pt' (is truncated|is not a checkpoint)"):
        zgrad.load(path)
    with pytest.raises(CheckpointError, match=r"BytesIO object (is truncated|is not a checkpoint)"):
        zgrad.load(io.BytesIO(checkpoint_bytes[:cut]))


def test_a_short_read_from_a_stream_that_cannot_tell_its_size(checkpoint_bytes):
    class Stream:
        def __init__(self, data):
            self.inner = io.BytesIO(data)

        def read(self, count=-1):
            return self.inner.read(count)

    assert zgrad.load(Stream(checkpoint_bytes))["epoch"] == 1
    with pytest.raises(CheckpointError, match="the Stream object is truncated: tensor 'w' should have 512 bytes"):
        zgrad.load(Stream(checkpoint_bytes[:-8]))


def test_bytes_after_the_last_tensor_of_a_file(checkpoint_bytes, tmp_path):
    path = tmp_path / "longer.pt"
    path.write_bytes(checkpoint_bytes + b"junk")
    with pytest.raises(CheckpointError, match="longer.pt' is damaged: it holds 4 bytes after its last tensor"):
        zgrad.load(path)


def safetensors_file(path: Path, header: dict, data: bytes) -> Path:
    text = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(text)) + text + data)
    return path


def test_a_dtype_zgrad_lacks(tmp_path):
    u16 = safetensors_file(tmp_path / "u16.safetensors",
                           {"w": {"dtype": "U16", "shape": [2], "data_offsets": [0, 4]}}, b"\0" * 4)
    with pytest.raises(CheckpointError, match="u16.safetensors': tensor 'w' has dtype U16, which zgrad has no "
                                              "tensors of; zgrad loads BOOL, U8, I8, I16, I32, I64, F16, BF16, F32, F64"):
        zgrad.load(u16)
    uint32 = tmp_path / "uint32.safetensors"
    safetensors_numpy.save_file({"w": np.ones(2, np.uint32)}, uint32)
    with pytest.raises(CheckpointError, match="tensor 'w' has dtype U32"):
        zgrad.load(uint32)


@pytest.mark.parametrize("dtype", ["bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32",
                                   "float64"])
def test_every_tensor_dtype_round_trips(tmp_path, dtype):
    values = zgrad.arange(-3, 3).to(getattr(zgrad, dtype))
    zgrad.save({"w": values}, tmp_path / "w.pt")
    loaded = zgrad.load(tmp_path / "w.pt")["w"]
    assert loaded.dtype == values.dtype
    assert zgrad.equal(loaded, values)


def test_headers_that_break_the_format(tmp_path):
    cases = {
        "gap": ({"a": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}}, b"\0" * 8,
                "tensor 'a' starts at data offset 4, expected 0"),
        "size": ({"a": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}}, b"\0" * 8,
                 r"tensor 'a' of dtype F32 and shape \[3\] spans 8 bytes, expected 12"),
        "fields": ({"a": {"dtype": "F32", "shape": [1]}}, b"\0" * 4, "tensor 'a' lacks dtype, shape or data_offsets"),
        "shape": ({"a": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 4]}}, b"\0" * 4,
                  r"tensor 'a' has shape \[-1\], not a list of sizes"),
        "metadata": ({"__metadata__": {"n": 1}}, b"", "__metadata__ must map names to strings"),
        "version": ({"__metadata__": {"zgrad.format": "7", "zgrad.structure": "null"}}, b"",
                    "is a zgrad checkpoint of format '7'; this zgrad reads format 1; upgrade zgrad"),
        "structure": ({"__metadata__": {"zgrad.format": "1", "zgrad.structure": "{\"set\": [1]}"}}, b"",
                      "its structure holds .* at obj, which is no value of checkpoint format 1"),
        "reference": ({"__metadata__": {"zgrad.format": "1", "zgrad.structure": "{\"tensor\": \"w\"}"}}, b"",
                      "its structure refers to tensor 'w', which the file lacks"),
    }
    for name, (header, data, message) in cases.items():
        with pytest.raises(CheckpointError, match=message):
            zgrad.load(safetensors_file(tmp_path / name, header, data))


def test_load_of_what_is_not_a_file():
    with pytest.raises(TypeError, match="zgrad.load expects a path or a binary file object with read"):
        zgrad.load(42)
    with pytest.raises(TypeError, match="zgrad.save expects a path or a binary file object with write"):
        zgrad.save({}, 42)
    with pytest.raises(FileNotFoundError):
        zgrad.load("/nonexistent/checkpoint.pt")
