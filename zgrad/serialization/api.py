"""``zgrad.save`` and ``zgrad.load``: checkpoints as safetensors files, without pickle.

Every tensor and numpy array of the saved object is an entry of the file under the path that
leads to it (``MODEL_STATE.fc.weight``); the rest of the object (containers, numbers, strings,
where each tensor sits) is JSON in the header's ``__metadata__`` under ``"zgrad.structure"``,
with ``"zgrad.format"`` giving its version. docs/checkpoints.md describes the layout.
"""

from __future__ import annotations

import itertools
import json
from typing import Any, Callable

import numpy as np

from zgrad.device import Device, as_device
from zgrad.errors import CheckpointError, ZgradError
from zgrad.kernels import dispatch
from zgrad.nn.module import Parameter
from zgrad.serialization.files import is_path, open_source, write_atomically, write_to_file
from zgrad.serialization.layout import (
    ARRAY_DTYPES, TENSOR_DTYPES, Entry, decode_header, encode_header, header_length,
)
from zgrad.serialization.structure import FORMAT_VERSION, flatten, rebuild
from zgrad.tensor import Tensor

__all__ = ["load", "save"]

FORMAT_KEY = "zgrad.format"
STRUCTURE_KEY = "zgrad.structure"


def save(obj: Any, f: Any) -> None:
    """Save ``obj`` to ``f`` as a safetensors file, as ``torch.save`` saves it (without pickle).

    Args:
        obj: nested dicts, lists and tuples of tensors, numpy arrays, ints, floats, bools,
            strings, None and numpy dtypes (module and optimizer state dicts,
            ``{"MODEL_STATE": ..., "EPOCHS_RUN": 3}``).
        f: a path (str or ``os.PathLike``), written atomically: a temporary file in the same
            directory, fsynced, renamed over the target; or a binary file object with
            ``write`` (``BytesIO``, an open file, an fsspec file), written at its position.

    Blocks until written (for a path, until the data and the rename are on disk). CUDA tensors
    are copied to the host one at a time; CPU tensors are written from their own memory.

    Raises:
        TypeError: ``obj`` holds a value that cannot be stored (a module, a lambda, ...), naming
            where it is, e.g. ``obj['model']``; nothing is written.
        ValueError: ``obj`` contains itself.
        RuntimeError: the path's directory does not exist.
    """
    flat = flatten(obj)
    names = list(flat.arrays)
    metadata = {FORMAT_KEY: str(FORMAT_VERSION),
                STRUCTURE_KEY: json.dumps(flat.tree, separators=(",", ":"), allow_nan=False)}
    header, order = encode_header([(n, flat.arrays[n].dtype, flat.arrays[n].shape) for n in names], metadata)
    data = (_file_bytes(flat.arrays[names[i]]) for i in order)  # a CUDA tensor staged one at a time
    chunks = itertools.chain([header], data)
    if is_path(f):
        write_atomically(f, chunks)
    else:
        write_to_file(f, chunks)


def load(f: Any, map_location: Any = None, *, weights_only: bool | None = True) -> Any:
    """Load what :func:`save` wrote to ``f``, or the tensors of any safetensors file.

    Args:
        f: a path (str or ``os.PathLike``) or a binary file object with ``read`` (and
            ``readinto``/``seek`` when it has them), read from its position.
        map_location: where tensors go, as in ``torch.load``: None (the device each was saved
            from), a device or device string (all of them there), a dict mapping saved locations
            to new ones (``{"cuda:0": "cpu"}``), or a callable ``fn(tensor, location)`` given each
            tensor on the CPU and its saved location string, returning the tensor to use (None:
            the saved device). numpy arrays always load as numpy arrays.
        weights_only: accepted for PyTorch's signature; a checkpoint holds only data, so True and
            False load the same.

    Returns:
        The saved object (dicts come back as ``dict``, tuples as ``tuple``, a ``Parameter`` as a
        ``Parameter``); for a safetensors file not written by zgrad, a dict of its tensors by name.

    Blocks until read. Raises:
        CheckpointError: ``f`` is not a safetensors file, is truncated or damaged, or holds a
            dtype zgrad has no tensors of; the message names the file.
        ZgradError: a tensor saved on CUDA with no CUDA here (pass ``map_location="cpu"``).
        FileNotFoundError: no file at the path.
    """
    place = _placement(map_location)
    with open_source(f) as source:
        name = source.name
        length = header_length(source.read(8), name, source.remaining)
        raw = source.read(length)
        if len(raw) < length:
            raise CheckpointError(f"{name} is truncated: its header should be {length} bytes, the file ends after "
                                  f"{len(raw)}")
        entries, metadata, data_bytes = decode_header(raw, name)
        tree = _structure(metadata, name)
        _check_dtypes(entries, tree, name)
        if source.remaining is not None:
            stored = source.remaining - 8 - length
            if stored < data_bytes:
                raise CheckpointError(f"{name} is truncated: its header describes {data_bytes} bytes of tensor data, "
                                      f"the file holds {stored} (a copy cut short, or a save that did not finish)")
            if stored > data_bytes and is_path(f):
                raise CheckpointError(f"{name} is damaged: it holds {stored - data_bytes} bytes after its last tensor")
        arrays = {entry.name: _read_array(source, entry) for entry in entries}

    def make_tensor(node: dict) -> Tensor:
        tensor = place(Tensor(_array(arrays, node["tensor"], name)), node.get("device", "cpu"), name)
        if node.get("parameter"):
            return Parameter(tensor, requires_grad=bool(node.get("requires_grad")))
        return tensor.requires_grad_() if node.get("requires_grad") else tensor

    if tree is None:  # a safetensors file from elsewhere: its tensors by name
        return {n: make_tensor({"tensor": n}) for n in sorted(arrays)}
    return rebuild(tree, make_tensor, lambda n: _array(arrays, n, name), name)


def _file_bytes(array: Any) -> np.ndarray:
    """``array``'s bytes as the file holds them (C order, little-endian): a view of its own memory
    when it already is so, else a copy (a CUDA array through the backend's pinned staging buffer)."""
    host = dispatch.host_buffer(array)
    if host.dtype.byteorder == ">":
        host = host.astype(host.dtype.newbyteorder("<"))
    return host.reshape(-1).view(np.uint8)


def _structure(metadata: dict[str, str], name: str) -> Any:
    """The structure tree of a zgrad checkpoint, or None for another safetensors file."""
    version = metadata.get(FORMAT_KEY)
    if version is None:
        return None
    if version != str(FORMAT_VERSION):
        newer = version.isdigit() and int(version) > FORMAT_VERSION
        raise CheckpointError(f"{name} is a zgrad checkpoint of format {version!r}; this zgrad reads format "
                              f"{FORMAT_VERSION}" + ("; upgrade zgrad to load it" if newer else ""))
    try:
        return json.loads(metadata[STRUCTURE_KEY])
    except (KeyError, json.JSONDecodeError) as exc:
        raise CheckpointError(f"{name} is damaged: its zgrad structure is missing or not JSON ({exc})") from None


def _check_dtypes(entries: list[Entry], tree: Any, name: str) -> None:
    """Every entry has a numpy dtype, and every one that becomes a tensor a zgrad dtype (checked
    before any data is read)."""
    ndarrays = _ndarray_names(tree)
    for entry in entries:
        allowed = ARRAY_DTYPES if entry.name in ndarrays else TENSOR_DTYPES
        if entry.dtype_name not in allowed:
            raise CheckpointError(f"{name}: tensor {entry.name!r} has dtype {entry.dtype_name}, which zgrad has no "
                                  f"tensors of; zgrad loads {', '.join(TENSOR_DTYPES)}. Convert it first (to F32, "
                                  "for instance, with the safetensors package and a framework that has the dtype)")


def _ndarray_names(tree: Any) -> set[str]:
    found, stack = set(), [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            if isinstance(node.get("ndarray"), str):
                found.add(node["ndarray"])
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return found


def _read_array(source: Any, entry: Entry) -> np.ndarray:
    array = dispatch.empty(entry.shape, entry.dtype, "cpu")
    got = source.read_into(memoryview(array.reshape(-1).view(np.uint8)))
    if got < entry.end - entry.begin:
        raise CheckpointError(f"{source.name} is truncated: tensor {entry.name!r} should have "
                              f"{entry.end - entry.begin} bytes, the file ends after {got}")
    return array


def _array(arrays: dict[str, np.ndarray], key: str, name: str) -> np.ndarray:
    if key not in arrays:
        raise CheckpointError(f"{name} is damaged: its structure refers to tensor {key!r}, which the file lacks")
    return arrays[key]


def _placement(map_location: Any) -> Callable[[Tensor, str, str], Tensor]:
    """``place(tensor, saved_location, file_name)``: where ``map_location`` puts a loaded tensor.

    Raises:
        TypeError: ``map_location`` is of none of the accepted kinds.
    """
    if map_location is None:
        return lambda tensor, location, name: _moved(tensor, location, name)
    if isinstance(map_location, (str, Device)):
        target = str(as_device(map_location))
        return lambda tensor, location, name: _moved(tensor, target, name)
    if isinstance(map_location, dict):
        return lambda tensor, location, name: _moved(tensor, str(map_location.get(location, location)), name)
    if callable(map_location):
        def call(tensor: Tensor, location: str, name: str) -> Tensor:
            result = map_location(tensor, location)
            if result is None:
                return _moved(tensor, location, name)
            if not isinstance(result, Tensor):
                raise TypeError(f"map_location returned a {type(result).__name__} for a tensor saved on {location}; "
                                "expected a Tensor, or None for the saved device")
            return result
        return call
    raise TypeError(f"map_location should be None, a device, a device string, a dict or a callable, got "
                    f"{type(map_location).__name__}")


def _moved(tensor: Tensor, location: str, name: str) -> Tensor:
    device = as_device(location)
    if device.type == "cuda" and not dispatch.backend_available("cuda"):
        raise ZgradError(f"{name}: attempting to load a tensor saved on {location} but CUDA is not available "
                         "(zgrad.cuda.is_available() is False). On a CPU-only machine pass map_location='cpu' "
                         "to zgrad.load to load every tensor on the CPU")
    return tensor.to(device)
