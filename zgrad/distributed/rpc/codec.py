"""The safe value codec: RPC arguments and results as msgpack plus raw tensor buffers.

Nothing is unpickled. A value tree may hold only the safe vocabulary: ``None``, bool, int,
float, str, bytes, list, tuple, dict, set, frozenset, :class:`~zgrad.Tensor` (with ``requires_grad``;
``nn.Parameter`` stays a Parameter), numpy arrays and dtypes of numeric kind, RRefs, WorkerInfo,
remote errors, and, by name:

- functions, classes and methods taken from their class travel as ``"module:qualname"`` and
  resolve on the receiver under the call-target allow-list (``targets.py``);
- other objects travel as their class's name plus their attribute dict, itself encoded with
  this codec. The receiver resolves the class under the same allow-list and rebuilds the object
  with ``object.__new__`` and that dict: no ``__init__``, ``__reduce__`` or ``__setstate__``,
  no code of the object runs. A cycle, an object without ``__dict__`` or a value outside this
  vocabulary is an error naming the attribute path (``model.fc._parameters['weight']``).

Tensors and arrays are replaced in the tree by references into a buffer table and travel as raw
frames: the encoder hands the transport the (C-contiguous) arrays themselves, never a copy; the
decoder rebuilds arrays with ``np.frombuffer`` over the received frames. A CUDA tensor is copied
on the sending thread's stream into a pinned host buffer, which is sent zero-copy and goes back to
the CUDA backend's pool once the transport lets go of it; its reference carries its device, and
the receiver copies it up into its own CUDA device (an error where it has none).

Wire form: msgpack with extension types (below) for what msgpack lacks natively.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

import types

import msgpack
import numpy as np

from zgrad.distributed.rpc.targets import TargetError, target_name
from zgrad.distributed.rpc.wire_arrays import (
    ALLOWED_DTYPE_KINDS,
    EXT_TENSOR,
    MAX_NDIM,
    CodecError,
    array_from_buffer,
    array_spec,
    checked_dtype,
    parse_tensor_ref,
    tensor_ref,
)
from zgrad.distributed.rpc.worker_info import WorkerInfo
from zgrad.errors import ProtocolError, RemoteError, ZgradError
from zgrad.kernels import dispatch, promotion
from zgrad.nn.module import Parameter
from zgrad.tensor import Tensor

__all__ = ["Encoded", "encode_value", "decode_value", "CodecError", "SAFE_TYPES_HELP", "array_spec", "array_from_buffer",
           "ALLOWED_DTYPE_KINDS", "MAX_NDIM"]

EXT_TUPLE = 1
# EXT_TENSOR = 2: a tensor reference (wire_arrays.py)
EXT_NDARRAY = 3
EXT_RREF = 4
EXT_WORKER_INFO = 5
EXT_REMOTE_ERROR = 6
EXT_NAMED = 7  # a function, class or method, by "module:qualname"
EXT_OBJECT = 8  # [class "module:qualname", attribute map]
EXT_DTYPE = 9  # a numeric numpy dtype, by its dtype string
EXT_SET = 10  # [frozen, items]

_PACK_BUFFER = 1024

SAFE_TYPES_HELP = (
    "RPC values may be None, bool, int, float, str, bytes, list, tuple, dict, set, zgrad.Tensor, "
    "numeric numpy arrays and dtypes, RRef, WorkerInfo, module-level functions and classes, and objects "
    "of module-level classes with a __dict__ of such values (nested freely)"
)
_FUNCTION_TYPES = (types.FunctionType, types.BuiltinFunctionType, types.MethodType, type)


@dataclass
class Encoded:
    """An encoded value: the msgpack payload, the raw buffers it refers to, and the tensors met.

    Attributes:
        payload: msgpack bytes of the value tree.
        buffers: C-contiguous arrays, one per tensor or array, in reference order.
        tensors: the :class:`Tensor` objects encoded, in the same order as their buffers
            (numpy arrays are not listed); distributed autograd attaches send functions to them.
    """

    payload: bytes
    buffers: list[np.ndarray] = field(default_factory=list)
    tensors: list[Tensor] = field(default_factory=list)


RRefEncoder = Callable[[Any], list]
RRefDecoder = Callable[[list], Any]


class _Encoder:
    def __init__(self, encode_rref: RRefEncoder | None, device_map: Mapping[str, str] | None = None) -> None:
        self.encode_rref = encode_rref
        self.device_map = device_map
        self.buffers: list[np.ndarray] = []
        self.tensors: list[Tensor] = []
        self.objects_open: set[int] = set()  # ids of the objects being encoded (cycle check)
        self._headers: msgpack.Packer | None = None

    @property
    def headers(self) -> msgpack.Packer:
        """Packs container headers, for values encoded piece by piece (made on first use)."""
        if self._headers is None:
            self._headers = msgpack.Packer(use_bin_type=True)
        return self._headers

    def pack(self, value: Any) -> bytes:
        # A small starting buffer (it grows as needed): packb's default 1 MiB buffer is fresh
        # memory for every nested pack (extension payloads), paid for in page faults each time.
        packer = msgpack.Packer(default=self.default, strict_types=True, use_bin_type=True, buf_size=_PACK_BUFFER)
        return packer.pack(value)

    def _array_ref(self, array: Any) -> int:
        array_spec(array)  # checks the dtype
        self.buffers.append(dispatch.host_buffer(array))  # device arrays: staged through pinned memory
        return len(self.buffers) - 1

    def default(self, obj: Any) -> Any:
        kind = type(obj)
        if kind is tuple:
            return msgpack.ExtType(EXT_TUPLE, self.pack(list(obj)))
        if kind is set or kind is frozenset:
            return msgpack.ExtType(EXT_SET, self.pack([kind is frozenset, list(obj)]))
        if isinstance(obj, Tensor):
            array = obj._data
            device = "cpu" if type(array) is np.ndarray or dispatch.device_type_of(array) == "cpu" else "cuda:0"
            if self.device_map:
                device = self.device_map.get(device, device)
            ref = tensor_ref(len(self.buffers), array, obj.requires_grad, isinstance(obj, Parameter), device)
            self.buffers.append(dispatch.host_buffer(array))  # device arrays: staged through pinned memory
            self.tensors.append(obj)
            return ref
        if isinstance(obj, np.ndarray):
            index = self._array_ref(obj)
            return msgpack.ExtType(EXT_NDARRAY, self.pack([index, *array_spec(obj)]))
        if isinstance(obj, np.generic):
            return obj.item()
        if isinstance(obj, WorkerInfo):
            return msgpack.ExtType(EXT_WORKER_INFO, self.pack([obj.name, obj.id]))
        if isinstance(obj, RemoteError):
            return msgpack.ExtType(EXT_REMOTE_ERROR, self.pack(
                [obj.remote_type, obj.remote_message, obj.worker, obj.remote_traceback]))
        if self.encode_rref is not None and getattr(obj, "_is_zgrad_rref", False):
            return msgpack.ExtType(EXT_RREF, self.pack(self.encode_rref(obj)))
        for plain in (bool, int, float, str, bytes, list, dict):
            if isinstance(obj, plain):  # subclasses (IntEnum, OrderedDict, ...) travel as their base
                return plain(obj)
        if isinstance(obj, np.dtype):
            if promotion.kind(obj) not in ALLOWED_DTYPE_KINDS or obj.fields is not None:
                raise CodecError(f"cannot send the dtype {obj} in an RPC: only numeric dtypes travel")
            return msgpack.ExtType(EXT_DTYPE, self.pack(promotion.dtype_str(obj)))
        if isinstance(obj, _FUNCTION_TYPES):
            return msgpack.ExtType(EXT_NAMED, self.pack(self._name_of(obj)))
        return msgpack.ExtType(EXT_OBJECT, self._object(obj))

    @staticmethod
    def _name_of(obj: Any) -> str:
        try:
            return target_name(obj)
        except TargetError as exc:
            raise CodecError(f"cannot send {obj!r} in an RPC: {exc}") from None

    def _object(self, obj: Any) -> bytes:
        """``[class name, attribute map]`` of an object, packed; the map built key by key so that
        a failure deep inside names its attribute path."""
        kind = type(obj)
        state = getattr(obj, "__dict__", None)
        if type(state) is not dict:
            raise CodecError(
                f"cannot send a value of type {kind.__module__}.{kind.__qualname__} in an RPC: {SAFE_TYPES_HELP}. "
                "Convert it to one of those (e.g. a numpy array or a list), or keep the object on its worker behind an RRef.")
        if id(obj) in self.objects_open:
            raise CodecError(f"cannot send a cyclic object in an RPC: this {kind.__qualname__} contains itself; "
                             "break the cycle or keep the object on its worker behind an RRef")
        self.objects_open.add(id(obj))
        try:
            class_name = self._name_of(kind)
            attributes = self._tracked_map(state, attribute=True)
        finally:
            self.objects_open.discard(id(obj))
        return self.headers.pack_array_header(2) + self.pack(class_name) + attributes

    def _tracked(self, value: Any, where: str) -> bytes:
        """``value`` packed; on failure its position ``where`` is added to the error's path."""
        try:
            kind = type(value)
            if kind is dict:
                return self._tracked_map(value, attribute=False)
            if kind is list or kind is tuple:
                items = self.headers.pack_array_header(len(value)) + b"".join(
                    self._tracked(item, f"[{i}]") for i, item in enumerate(value))
                return items if kind is list else self.headers.pack(msgpack.ExtType(EXT_TUPLE, items))
            return self.pack(value)
        except CodecError as exc:
            exc.path.insert(0, where)
            raise

    def _tracked_map(self, mapping: dict, attribute: bool) -> bytes:
        parts = [self.headers.pack_map_header(len(mapping))]
        for key, item in mapping.items():
            parts.append(self.pack(key))
            parts.append(self._tracked(item, f".{key}" if attribute and isinstance(key, str) else f"[{key!r}]"))
        return b"".join(parts)


def encode_value(value: Any, encode_rref: RRefEncoder | None = None, device_map: Mapping[str, str] | None = None) -> Encoded:
    """Encode ``value`` for the wire; each tensor's reference names the device it is to land on
    at the receiver: its own, or what ``device_map`` (this device -> the receiver's) says.

    Raises:
        CodecError: the value (or something inside it) is outside the safe vocabulary, or an
            int does not fit in 64 bits.
    """
    encoder = _Encoder(encode_rref, device_map)
    try:
        payload = encoder.pack(value)
    except CodecError:
        raise
    except (OverflowError, ValueError) as exc:
        raise CodecError(f"cannot send value in an RPC: {exc}") from exc
    return Encoded(payload, encoder.buffers, encoder.tensors)


NameResolver = Callable[[str, str], Any]

def _place(array: np.ndarray, device: str) -> Any:
    """A received array on ``device``, copied up from the received frame for "cuda:0" (zgrad uses
    one CUDA device per process).

    Raises:
        ZgradError: a CUDA tensor arrived at a worker without a CUDA device.
    """
    if device == "cpu":
        return array
    if not dispatch.backend_available("cuda"):
        raise ZgradError(f"received a tensor on {device}, but this worker has no CUDA device; "
                         "move it to the CPU (.cpu()) before sending it here")
    placed = dispatch.to_device(array, "cuda")
    dispatch.backend("cuda").synchronize()  # the copy is queued on this thread's stream; others read it
    return placed


class _Decoder:
    def __init__(self, buffers: tuple[memoryview, ...] | list, decode_rref: RRefDecoder | None,
                 resolve: NameResolver | None, device_map: Mapping[str, str] | None) -> None:
        self.device_map = device_map
        self.buffers = buffers
        self.used = [False] * len(buffers)
        self.decode_rref = decode_rref
        self.resolve = resolve
        self.tensors: list[Tensor] = []

    def unpack(self, data: bytes) -> Any:
        return msgpack.unpackb(data, ext_hook=self.ext_hook, strict_map_key=False, raw=False, use_list=True)

    def _array(self, index: Any, dtype_str: Any, shape: Any) -> np.ndarray:
        self._use(index)
        try:
            return array_from_buffer(self.buffers[index], dtype_str, shape)
        except ProtocolError as exc:
            raise ProtocolError(f"buffer {index}: {exc}") from None

    def _use(self, index: Any) -> None:
        if not isinstance(index, int) or not 0 <= index < len(self.buffers):
            raise ProtocolError(f"buffer reference {index!r} is outside the {len(self.buffers)} buffers received")
        if self.used[index]:
            raise ProtocolError(f"buffer {index} is referenced twice")
        self.used[index] = True

    def _tensor(self, data: bytes) -> Tensor:
        ref = parse_tensor_ref(data)
        self._use(ref.index)
        array = ref.array(self.buffers)
        device = ref.device
        if self.device_map:
            device = self.device_map.get(device, device)
        if device != "cpu":
            array = _place(array, device)
        if ref.parameter:
            tensor: Tensor = Parameter(array, requires_grad=ref.requires_grad)
        else:
            tensor = Tensor(array)
            if ref.requires_grad:
                tensor.requires_grad_(True)
        self.tensors.append(tensor)
        return tensor

    def _named(self, name: Any, what: str) -> Any:
        if self.resolve is None:
            raise ProtocolError(f"a {what} is not accepted in this message")
        if not isinstance(name, str):
            raise ProtocolError(f"malformed {what} name")
        return self.resolve(name, what)

    def _object(self, fields: Any) -> Any:
        if not (isinstance(fields, list) and len(fields) == 2 and isinstance(fields[1], dict)
                and all(isinstance(k, str) for k in fields[1])):
            raise ProtocolError("malformed object: expected [class name, attribute map with string keys]")
        cls = self._named(fields[0], "class of an object")
        if not isinstance(cls, type) or cls.__new__ is not object.__new__:
            raise TargetError(
                f"cannot rebuild an object of {fields[0]!r}: only classes that leave __new__ to object can be "
                "rebuilt without running their code; send its fields instead, or keep it behind an RRef")
        obj = object.__new__(cls)
        state = getattr(obj, "__dict__", None)
        if state is None:
            raise TargetError(f"cannot rebuild an object of {fields[0]!r}: its instances have no __dict__")
        state.update(fields[1])
        return obj

    def ext_hook(self, code: int, data: bytes) -> Any:
        if code == EXT_TENSOR:
            return self._tensor(data)
        fields = self.unpack(data)
        if code == EXT_TUPLE:
            if not isinstance(fields, list):
                raise ProtocolError("malformed tuple")
            return tuple(fields)
        if code == EXT_NDARRAY:
            if not isinstance(fields, list) or len(fields) != 3:
                raise ProtocolError("malformed array reference")
            return self._array(*fields)
        if code == EXT_WORKER_INFO:
            if not (isinstance(fields, list) and len(fields) == 2 and isinstance(fields[0], str) and isinstance(fields[1], int)):
                raise ProtocolError("malformed WorkerInfo")
            return WorkerInfo(fields[0], fields[1])
        if code == EXT_REMOTE_ERROR:
            if not (isinstance(fields, list) and len(fields) == 4 and all(isinstance(f, str) for f in fields)):
                raise ProtocolError("malformed remote error")
            return RemoteError(*fields)
        if code == EXT_RREF and self.decode_rref is not None:
            if not isinstance(fields, list):
                raise ProtocolError("malformed RRef")
            return self.decode_rref(fields)
        if code == EXT_NAMED:
            return self._named(fields, "function value")
        if code == EXT_OBJECT:
            return self._object(fields)
        if code == EXT_DTYPE:
            return checked_dtype(fields)
        if code == EXT_SET:
            if not (isinstance(fields, list) and len(fields) == 2 and isinstance(fields[0], bool)
                    and isinstance(fields[1], list)):
                raise ProtocolError("malformed set")
            try:
                return frozenset(fields[1]) if fields[0] else set(fields[1])
            except TypeError:
                raise ProtocolError("a set holds an unhashable item") from None
        raise ProtocolError(f"unknown value extension type {code}")


@dataclass
class Decoded:
    """A decoded value and the tensors found in it, in encoding order."""

    value: Any
    tensors: list[Tensor]


def decode_value(payload: Any, buffers: tuple[memoryview, ...] | list = (), decode_rref: RRefDecoder | None = None,
                 resolve: NameResolver | None = None, device_map: Mapping[str, str] | None = None) -> Decoded:
    """Decode a payload made by :func:`encode_value`, over the received ``buffers`` (no copy for
    CPU tensors). ``device_map`` moves tensors from the device their reference names to another
    (a reply travels the inverse of the caller's map).

    Args:
        decode_rref: rebuilds an RRef from its fields (RRefs are refused without it).
        resolve: ``resolve(name, what)`` returns the function or class a ``"module:qualname"``
            names, under the receiver's allow-list (names are refused without it).

    Raises:
        ProtocolError: the payload is not valid msgpack, uses an unknown extension, refers to a
            missing buffer or describes an array that does not match its buffer.
        TargetError: a function or class named in it is not allowed here.
    """
    if not isinstance(payload, (bytes, bytearray, memoryview)):
        raise ProtocolError(f"value payload must be bytes, got {type(payload).__name__}")
    decoder = _Decoder(buffers, decode_rref, resolve, device_map)
    try:
        value = decoder.unpack(bytes(payload))
    except ProtocolError:
        raise
    except (ValueError, TypeError, RecursionError, msgpack.UnpackException, msgpack.ExtraData) as exc:
        raise ProtocolError(f"value payload is not valid: {type(exc).__name__}: {exc}") from None
    if not all(decoder.used):
        raise ProtocolError(f"{decoder.used.count(False)} received buffer(s) are not referenced by the value")
    return Decoded(value, decoder.tensors)
