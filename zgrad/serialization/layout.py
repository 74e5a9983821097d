"""The safetensors file layout, as the ``safetensors`` package writes and checks it.

A file is: 8 bytes, the little-endian length N of the header; N bytes of a UTF-8 JSON object (the
header) mapping each tensor's name to ``{"dtype", "shape", "data_offsets": [begin, end]}``, plus an
optional ``"__metadata__"`` object of string values; then the data, every tensor's bytes
(C order, little-endian) at its offsets, counted from the end of the header. The offsets tile the
data exactly: no gap, no overlap, nothing after the last tensor. The header is padded with spaces
to a multiple of 8 bytes and zgrad writes 8-byte items first, so every tensor starts aligned to
its item size.

This module builds and checks headers; it reads and writes no file (``files.py`` does).
"""

from __future__ import annotations

import json
import math
import struct
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from zgrad.errors import CheckpointError
from zgrad.kernels.promotion import BFLOAT16

__all__ = [
    "ARRAY_DTYPES", "Entry", "HEADER_LENGTH", "MAX_HEADER_BYTES", "TENSOR_DTYPES", "decode_header", "dtype_name",
    "encode_header", "header_length",
]

# The dtype names of the safetensors format that numpy has (BF16 through ml_dtypes); the F8 and
# F4/F6 kinds and complex ones zgrad does not load.
ARRAY_DTYPES: dict[str, np.dtype] = {
    "BOOL": np.dtype(np.bool_), "U8": np.dtype(np.uint8), "I8": np.dtype(np.int8), "U16": np.dtype(np.uint16),
    "I16": np.dtype(np.int16), "F16": np.dtype(np.float16), "U32": np.dtype(np.uint32), "I32": np.dtype(np.int32),
    "F32": np.dtype(np.float32), "U64": np.dtype(np.uint64), "I64": np.dtype(np.int64), "F64": np.dtype(np.float64),
    "BF16": BFLOAT16,
}
_NAMES = {dtype: name for name, dtype in ARRAY_DTYPES.items()}
# The dtypes a zgrad tensor can have (numpy arrays in a checkpoint may have any of ARRAY_DTYPES).
TENSOR_DTYPES = ("BOOL", "U8", "I8", "I16", "I32", "I64", "F16", "BF16", "F32", "F64")

HEADER_LENGTH = struct.Struct("<Q")
# The safetensors package refuses headers over 100 MB; so does zgrad (a damaged length field
# would otherwise ask for a huge allocation).
MAX_HEADER_BYTES = 100_000_000
_ALIGNMENT = 8


@dataclass(frozen=True)
class Entry:
    """One tensor of a file: its name, dtype name, shape and byte range in the data."""

    name: str
    dtype_name: str
    shape: tuple[int, ...]
    begin: int
    end: int

    @property
    def dtype(self) -> np.dtype | None:
        """The numpy dtype, or None for a safetensors dtype numpy lacks (BF16, F8_*, ...)."""
        return ARRAY_DTYPES.get(self.dtype_name)


def dtype_name(dtype: np.dtype) -> str | None:
    """The safetensors name of a numpy dtype (either byte order), or None where the format has none."""
    return _NAMES.get(dtype.newbyteorder("="))


def encode_header(arrays: Sequence[tuple[str, np.dtype, tuple[int, ...]]],
                  metadata: dict[str, str]) -> tuple[bytes, list[int]]:
    """The length prefix and padded header of a file holding ``arrays`` (name, dtype, shape; each
    dtype one :func:`dtype_name` knows), and the order their data must follow: 8-byte items
    first, then 4, 2 and 1, each group in the given order."""
    order = sorted(range(len(arrays)), key=lambda i: -arrays[i][1].itemsize)
    header: dict[str, Any] = {"__metadata__": metadata} if metadata else {}
    offset = 0
    for i in order:
        name, dtype, shape = arrays[i]
        size = math.prod(shape) * dtype.itemsize
        header[name] = {"dtype": _NAMES[dtype.newbyteorder("=")], "shape": list(shape),
                        "data_offsets": [offset, offset + size]}
        offset += size
    text = json.dumps(header, separators=(",", ":")).encode("ascii")
    text += b" " * (-(HEADER_LENGTH.size + len(text)) % _ALIGNMENT)
    return HEADER_LENGTH.pack(len(text)) + text, order


# How torch.save's files start: a zip archive (its default since 1.6), or a pickle (protocol 2 to 5);
# a safetensors file may start with these bytes too, so they count only where the length is impossible
_TORCH_FORMATS = (b"PK\x03\x04", b"\x80\x02", b"\x80\x03", b"\x80\x04", b"\x80\x05")


def header_length(prefix: bytes, source: str, file_bytes: int | None) -> int:
    """The header length an 8-byte ``prefix`` announces, checked against the format's limit and
    the file's size (``file_bytes``, None when unknown).

    Raises:
        CheckpointError: the file is shorter than a prefix, or announces an impossible header.
    """
    if len(prefix) < HEADER_LENGTH.size:
        raise CheckpointError(f"{source} is not a checkpoint: it holds {len(prefix)} bytes, fewer than the 8-byte "
                              "header length a safetensors file starts with")
    (length,) = HEADER_LENGTH.unpack(prefix)
    impossible = length > MAX_HEADER_BYTES or file_bytes is not None and HEADER_LENGTH.size + length > file_bytes
    if impossible and prefix.startswith(_TORCH_FORMATS):
        raise CheckpointError(
            f"{source} looks like a PyTorch checkpoint (torch.save's zip or pickle format), which zgrad does not read: "
            "it never unpickles a file. Convert the state_dict once where PyTorch runs: "
            "safetensors.torch.save_file(torch.load(path), 'model.safetensors'), then zgrad.load('model.safetensors')")
    if length > MAX_HEADER_BYTES:
        raise CheckpointError(f"{source} is not a safetensors checkpoint: its first 8 bytes announce a "
                              f"{length}-byte header, over the format's {MAX_HEADER_BYTES}-byte limit")
    if file_bytes is not None and HEADER_LENGTH.size + length > file_bytes:
        raise CheckpointError(f"{source} is truncated or not a checkpoint: its header should be {length} bytes "
                              f"but the file holds only {file_bytes - HEADER_LENGTH.size} after the length")
    return length


def decode_header(raw: bytes, source: str) -> tuple[list[Entry], dict[str, str], int]:
    """The entries (in data order), the metadata and the data size a header describes, checked
    as the safetensors package checks them.

    Raises:
        CheckpointError: the header is not a JSON object of well-formed entries, an entry's size
            disagrees with its dtype and shape, or the offsets leave a gap or overlap.
    """
    try:
        header = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CheckpointError(f"{source} is not a safetensors checkpoint: its header is not UTF-8 JSON ({exc})") from None
    if not isinstance(header, dict):
        raise CheckpointError(f"{source} is not a safetensors checkpoint: its header is a JSON "
                              f"{type(header).__name__}, not an object")
    metadata = header.pop("__metadata__", None) or {}
    if not isinstance(metadata, dict) or not all(isinstance(v, str) for v in metadata.values()):
        raise CheckpointError(f"{source}: the header's __metadata__ must map names to strings")
    entries = [_entry(name, info, source) for name, info in header.items()]
    entries.sort(key=lambda e: (e.begin, e.end))
    offset = 0
    for entry in entries:
        if entry.begin != offset:
            raise CheckpointError(f"{source} is damaged: tensor {entry.name!r} starts at data offset {entry.begin}, "
                                  f"expected {offset} (tensors must follow each other without gaps)")
        offset = entry.end
    return entries, metadata, offset


def _entry(name: str, info: Any, source: str) -> Entry:
    def bad(what: str) -> CheckpointError:
        return CheckpointError(f"{source} is not a safetensors checkpoint: tensor {name!r} {what}")

    if not isinstance(info, dict) or not {"dtype", "shape", "data_offsets"} <= set(info):
        raise bad("lacks dtype, shape or data_offsets")
    dtype, shape, offsets = info["dtype"], info["shape"], info["data_offsets"]
    if not isinstance(dtype, str):
        raise bad(f"has dtype {dtype!r}, not a name such as 'F32'")
    if not isinstance(shape, list) or not all(type(n) is int and n >= 0 for n in shape):
        raise bad(f"has shape {shape!r}, not a list of sizes")
    if not (isinstance(offsets, list) and len(offsets) == 2 and all(type(n) is int for n in offsets)
            and 0 <= offsets[0] <= offsets[1]):
        raise bad(f"has data_offsets {offsets!r}, not [begin, end] with begin <= end")
    entry = Entry(name, dtype, tuple(shape), offsets[0], offsets[1])
    if entry.dtype is not None and entry.end - entry.begin != math.prod(entry.shape) * entry.dtype.itemsize:
        raise bad(f"of dtype {dtype} and shape {list(shape)} spans {entry.end - entry.begin} bytes, expected "
                  f"{math.prod(entry.shape) * entry.dtype.itemsize}")
    return entry
