"""The values a DataLoader's processes exchange (the sampler's keys one way, batches the other),
as a msgpack-able tree plus shared memory for their arrays: no pickle.

Python's ``None``, bools, ints, floats, strings and bytes stay as they are; every other node is a
list whose first item is its tag:

====================  ===========================================================================
``[LIST, *items]``    a list (``TUPLE``: a tuple)
``[DICT, k, v, ...]`` a dict, keys and values alternating (``MAPPING``: ``[MAPPING, cls, k, v,
                      ...]``, another mapping type, rebuilt as ``cls(dict)``, else a dict)
``[NAMEDTUPLE, cls,   a namedtuple, rebuilt as ``cls(*items)``
*items]``
``[OBJECT, cls,       any other object with a ``__dict__`` (a dataclass, a batch class), rebuilt
state]``              without running its ``__init__``: ``cls.__new__(cls)``, then its ``__dict__``
``[TENSOR, segment,   a CPU tensor: C-contiguous data at ``offset`` of the message's shared-memory
offset, shape, dtype, ``segment`` (-1 for no data), numpy dtype string, ``requires_grad``
requires_grad]``
``[NDARRAY, segment,  a numpy array, likewise
offset, shape,
dtype]``
``[NPSCALAR, dtype,   a numpy scalar, its bytes
data]``
====================  ===========================================================================

``cls`` is ``"module:qualname"``; the receiver resolves it only among modules it has already
imported, and only to a class.
"""

from __future__ import annotations

import collections.abc
import sys
import types
from typing import Any

import numpy as np

from zgrad.kernels.promotion import dtype_str
from zgrad.tensor import Tensor
from zgrad.utils.data._utils.shared_memory import BatchArena

__all__ = ["encode", "decode", "imported_class"]

LIST, TUPLE, DICT, MAPPING, NAMEDTUPLE, OBJECT, TENSOR, NDARRAY, NPSCALAR = range(9)
_PLAIN = (type(None), bool, int, float, str, bytes)
_PLAIN_OF_SUBCLASS = ((int, int), (float, float), (str, str.__str__), (bytes, bytes))
# msgpack's integers are 64-bit
_INT_RANGE = (-(2**63), 2**64 - 1)


def _where(path: tuple) -> str:
    return "value" + "".join(f"[{key!r}]" for key in path)


def _class_ref(cls: type, path: tuple) -> str:
    if "<locals>" in cls.__qualname__:
        raise TypeError(f"DataLoader: {_where(path)} is a {cls.__qualname__}, a class defined inside a function, "
                        "which the other process cannot look up by name; define it at module level")
    return f"{cls.__module__}:{cls.__qualname__}"


def imported_class(ref: str) -> type | None:
    """The class ``ref`` (``"module:qualname"``) names among the modules this process has already
    imported, or None: nothing is imported. ``__mp_main__`` (the main script in a spawned child)
    is ``__main__``."""
    module_name, _, qualname = ref.partition(":")
    target: Any = sys.modules.get("__main__" if module_name == "__mp_main__" else module_name)
    for part in qualname.split("."):
        target = getattr(target, part, None)
    return target if isinstance(target, type) else None


def _resolve_class(ref: str) -> type:
    target = imported_class(ref)
    if target is None:
        raise TypeError(f"DataLoader: a batch holds an instance of {ref}, which is not a class imported in this process; "
                        "import its module before iterating the loader")
    return target


def encode(value: Any, arena: BatchArena, path: tuple = ()) -> Any:
    """The tree of ``value`` (see the module docstring); its arrays are placed in ``arena``.

    Raises:
        TypeError: a value the tree cannot hold (named by its path), a CUDA tensor, or an array
            of Python objects.
        RuntimeError: a non-leaf tensor that requires grad (PyTorch's error).
    """
    kind = type(value)
    if kind in _PLAIN:
        if kind is int and not _INT_RANGE[0] <= value <= _INT_RANGE[1]:
            raise TypeError(f"DataLoader: {_where(path)} is an int beyond 64 bits ({value}); it cannot travel between processes")
        return value
    if isinstance(value, Tensor):
        return _encode_tensor(value, arena, path)
    if isinstance(value, np.ndarray):
        return [NDARRAY, *_encode_array(value, arena, path)]
    if isinstance(value, np.generic):
        return [NPSCALAR, dtype_str(value.dtype), value.tobytes()]
    for base, plain in _PLAIN_OF_SUBCLASS:  # an IntEnum, a str subclass, ...: as the plain value
        if isinstance(value, base):
            return encode(plain(value), arena, path)
    if kind is list or kind is tuple:
        return [LIST if kind is list else TUPLE, *(encode(v, arena, (*path, i)) for i, v in enumerate(value))]
    if isinstance(value, tuple) and hasattr(value, "_fields"):
        return [NAMEDTUPLE, _class_ref(kind, path), *(encode(v, arena, (*path, i)) for i, v in enumerate(value))]
    if isinstance(value, collections.abc.Mapping):
        head = [DICT] if kind is dict else [MAPPING, _class_ref(kind, path)]
        for key, item in value.items():
            head += [encode(key, arena, path), encode(item, arena, (*path, key))]
        return head
    if isinstance(value, (list, tuple)):
        return [LIST if isinstance(value, list) else TUPLE, *(encode(v, arena, (*path, i)) for i, v in enumerate(value))]
    if hasattr(value, "__dict__") and not callable(value) and not isinstance(value, types.ModuleType):
        return [OBJECT, _class_ref(kind, path), encode(dict(vars(value)), arena, path)]
    raise TypeError(f"DataLoader: {_where(path)} is a {kind.__qualname__}, which cannot travel between processes "
                    "(tensors, numpy arrays, numbers, strings, bytes, None, lists, tuples, dicts, namedtuples and "
                    "objects with a __dict__ that are not callable can)")


def _encode_tensor(value: Tensor, arena: BatchArena, path: tuple) -> list:
    if value.is_cuda:
        raise TypeError(f"DataLoader: {_where(path)} is a CUDA tensor; workers hand back CPU tensors: move batches "
                        "to the GPU in the main process (pin_memory=True speeds up that copy)")
    if value.requires_grad and value.grad_fn is not None:
        raise RuntimeError("Cowardly refusing to serialize non-leaf tensor which requires_grad, since autograd does "
                           "not support crossing process boundaries.  If you just want to transfer the data, call "
                           "detach() on the tensor before serializing (e.g., putting it on the queue).")
    return [TENSOR, *_encode_array(value._data, arena, path), value.requires_grad]


def _encode_array(array: np.ndarray, arena: BatchArena, path: tuple) -> list:
    if array.dtype.hasobject:
        raise TypeError(f"DataLoader: {_where(path)} is an array of Python objects, which cannot travel between processes")
    segment, offset = arena.place(array)
    return [segment, offset, list(array.shape), dtype_str(array.dtype)]


def decode(tree: Any, segments: list) -> Any:
    """The value ``tree`` encodes; its arrays are views of ``segments`` (the received mappings)."""
    if type(tree) is not list:
        return tree
    tag = tree[0]
    if tag == LIST:
        return [decode(v, segments) for v in tree[1:]]
    if tag == TUPLE:
        return tuple(decode(v, segments) for v in tree[1:])
    if tag == DICT:
        return {decode(tree[i], segments): decode(tree[i + 1], segments) for i in range(1, len(tree), 2)}
    if tag == MAPPING:
        items = {decode(tree[i], segments): decode(tree[i + 1], segments) for i in range(2, len(tree), 2)}
        try:
            return _resolve_class(tree[1])(items)
        except TypeError:
            return items
    if tag == NAMEDTUPLE:
        return _resolve_class(tree[1])(*(decode(v, segments) for v in tree[2:]))
    if tag == OBJECT:
        cls = _resolve_class(tree[1])
        obj = cls.__new__(cls)
        obj.__dict__.update(decode(tree[2], segments))
        return obj
    if tag == TENSOR:
        return Tensor(_decode_array(tree[1:5], segments), requires_grad=tree[5])
    if tag == NDARRAY:
        return _decode_array(tree[1:5], segments)
    if tag == NPSCALAR:
        return np.frombuffer(tree[2], dtype=np.dtype(tree[1]))[0]
    raise ValueError(f"DataLoader: unknown node tag {tag!r} in a message between its processes")


def _decode_array(fields: list, segments: list) -> np.ndarray:
    segment, offset, shape, dtype = fields
    if segment < 0:
        return np.empty(shape, np.dtype(dtype))
    return np.ndarray(tuple(shape), np.dtype(dtype), buffer=segments[segment], offset=offset)
