"""Arrays in RPC values on the wire: which dtypes and shapes travel, rebuilding a received array,
and the reference that stands for a tensor in an encoded value.

A tensor is replaced in the value tree by an extension (:data:`EXT_TENSOR`) whose data is the
msgpack array ``[buffer index, dtype string, shape, requires_grad]``, followed by ``is a
Parameter`` when it is one or not on the CPU, followed by the device when not on the CPU; its
bytes travel as a raw buffer. Packing such a reference, and unpacking and checking a received
one, cost more than the rest of a small call's value, and a process sends and receives few
distinct ones (an index, a dtype, a shape, two flags, a device): both ends remember them — the
sender the extension, the receiver what its bytes were checked to mean. Both memos are bounded
(a peer naming ever new shapes costs checks, not memory).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import msgpack
import numpy as np

from zgrad.distributed.rpc.device_maps import DEVICES
from zgrad.errors import ProtocolError, ZgradError
from zgrad.kernels import promotion
from zgrad.kernels.promotion import dtype_str, is_floating, kind

__all__ = ["ALLOWED_DTYPE_KINDS", "MAX_NDIM", "EXT_TENSOR", "CodecError", "TensorRef", "array_spec", "checked_dtype",
           "array_from_buffer", "tensor_ref", "parse_tensor_ref"]

ALLOWED_DTYPE_KINDS = frozenset("biufc")  # by promotion.kind: bfloat16 counts as "f"
EXT_TENSOR = 2  # the msgpack extension code of a tensor reference (codec.py lists them all)
MAX_NDIM = 64
# Distinct tensor references remembered by each memo.
_MEMO_SIZE = 4096


class CodecError(ZgradError, TypeError):
    """A value cannot be sent with the safe codec; the message names it and says what is allowed."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message
        self.path: list[str] = []  # where in the value, outermost first, filled in while unwinding

    def __str__(self) -> str:
        return f"{self.message} (at {''.join(self.path).lstrip('.')})" if self.path else self.message


# dtype strings already checked to be plain numeric dtypes (a few dozen exist at most).
_checked_dtypes: dict[str, np.dtype] = {}
# (index, dtype, shape, requires_grad, is a Parameter, device) -> the extension
_packed_refs: dict[tuple, msgpack.ExtType] = {}
# packed reference -> what it was checked to mean
_parsed_refs: dict[bytes, "TensorRef"] = {}


def _numeric(dtype: np.dtype) -> bool:
    return kind(dtype) in ALLOWED_DTYPE_KINDS and dtype.fields is None


def array_spec(array: np.ndarray) -> list:
    """``[dtype string, shape]`` of an array that may travel as a raw buffer.

    Raises:
        CodecError: a dtype that is not plain numeric (objects, strings, records).
    """
    dtype = array.dtype
    if not _numeric(dtype):
        raise CodecError(f"cannot send an array of dtype {dtype} in an RPC: only numeric dtypes travel")
    return [dtype_str(dtype), list(array.shape)]


def checked_dtype(dtype_str: Any) -> np.dtype:
    """The plain numeric dtype a received dtype string names.

    Raises:
        ProtocolError: not a string, not a dtype, or not a plain numeric one in its canonical spelling.
    """
    dtype = _checked_dtypes.get(dtype_str) if isinstance(dtype_str, str) else None
    if dtype is not None:
        return dtype
    if not isinstance(dtype_str, str):
        raise ProtocolError(f"array dtype must be a string, got {type(dtype_str).__name__}")
    try:
        dtype = np.dtype(dtype_str)
    except TypeError:
        raise ProtocolError(f"unknown array dtype {dtype_str!r}") from None
    if not _numeric(dtype) or promotion.dtype_str(dtype) != dtype_str:
        raise ProtocolError(f"array dtype {dtype_str!r} is not a plain numeric dtype")
    _checked_dtypes[dtype_str] = dtype
    return dtype


def _layout(dtype_str: Any, shape: Any) -> tuple[np.dtype, int]:
    """The dtype and element count a received ``[dtype string, shape]`` describes (checked)."""
    dtype = checked_dtype(dtype_str)
    if not isinstance(shape, list) or len(shape) > MAX_NDIM or not all(type(n) is int and n >= 0 for n in shape):
        raise ProtocolError(f"array shape {shape!r} is not a list of non-negative ints")
    count = 1
    for n in shape:
        count *= n
    return dtype, count


def _check_size(buffer: memoryview, dtype: np.dtype, shape: Any, count: int) -> None:
    if count * dtype.itemsize != buffer.nbytes:
        raise ProtocolError(f"a buffer of {buffer.nbytes} bytes cannot hold shape {list(shape)} of {dtype} "
                            f"({count * dtype.itemsize} bytes)")


def array_from_buffer(buffer: memoryview, dtype_str: Any, shape: Any) -> np.ndarray:
    """The array a received ``buffer`` holds, as :func:`array_spec` described it (no copy).

    Raises:
        ProtocolError: an unknown or non-numeric dtype, a malformed shape, or a size that does not
            match the buffer's.
    """
    dtype, count = _layout(dtype_str, shape)
    _check_size(buffer, dtype, shape, count)
    return np.frombuffer(buffer, dtype=dtype, count=count).reshape(shape)


def tensor_ref(index: int, array: Any, requires_grad: bool, parameter: bool, device: str) -> msgpack.ExtType:
    """The reference (an ``EXT_TENSOR`` extension) of a tensor whose buffer is ``index``.

    Raises:
        CodecError: the array's dtype is not plain numeric.
    """
    key = (index, array.dtype, array.shape, requires_grad, parameter, device)
    packed = _packed_refs.get(key)
    if packed is None:
        fields = [index, *array_spec(array), requires_grad]
        if parameter or device != "cpu":
            fields.append(parameter)
        if device != "cpu":
            fields.append(device)
        packed = msgpack.ExtType(EXT_TENSOR, msgpack.packb(fields))
        if len(_packed_refs) < _MEMO_SIZE:
            _packed_refs[key] = packed
    return packed


class TensorRef(NamedTuple):
    """What a received tensor reference says, checked: all but the buffer's size and use."""

    index: int
    dtype: np.dtype
    shape: tuple[int, ...]
    count: int
    requires_grad: bool
    parameter: bool
    device: str

    def array(self, buffers: Any) -> np.ndarray:
        """The array over ``buffers[self.index]`` (no copy).

        Raises:
            ProtocolError: the buffer's size does not match.
        """
        buffer = buffers[self.index]
        if buffer.nbytes != self.count * self.dtype.itemsize:
            try:
                _check_size(buffer, self.dtype, self.shape, self.count)
            except ProtocolError as exc:
                raise ProtocolError(f"buffer {self.index}: {exc}") from None
        array = np.frombuffer(buffer, dtype=self.dtype, count=self.count)
        return array if len(self.shape) == 1 else array.reshape(self.shape)


def parse_tensor_ref(data: bytes) -> TensorRef:
    """Check a received tensor reference (the ``EXT_TENSOR`` data).

    Raises:
        ProtocolError: not a well-formed reference, or it names a dtype, shape or device that
            cannot travel, or asks a non-float tensor to require grad.
    """
    ref = _parsed_refs.get(data)
    if ref is not None:
        return ref
    try:
        fields = msgpack.unpackb(data, raw=False, use_list=True)
    except Exception:  # msgpack raises many types on malformed input; all mean the same here
        fields = None
    if (not isinstance(fields, list) or len(fields) not in (4, 5, 6) or not all(isinstance(f, bool) for f in fields[3:5])
            or (len(fields) == 6 and fields[5] not in DEVICES)):
        raise ProtocolError("malformed tensor reference")
    index = fields[0]
    if not isinstance(index, int) or index < 0:
        raise ProtocolError(f"buffer reference {index!r} is not a buffer index")
    try:
        dtype, count = _layout(fields[1], fields[2])
    except ProtocolError as exc:
        raise ProtocolError(f"buffer {index}: {exc}") from None
    requires_grad = fields[3]
    if requires_grad and not is_floating(dtype):
        raise ProtocolError(f"a tensor of dtype {dtype} cannot require grad")
    ref = TensorRef(index, dtype, tuple(fields[2]), count, requires_grad, len(fields) >= 5 and fields[4],
                    fields[5] if len(fields) == 6 else "cpu")
    if len(_parsed_refs) < _MEMO_SIZE:
        _parsed_refs[data] = ref
    return ref
