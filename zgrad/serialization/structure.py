"""The structure of a checkpoint: the saved object as JSON (format 1), tensors and numpy arrays
replaced by references to the file's entries.

Each value is one JSON node (docs/checkpoints.md has the full table):

- ``null``, ``true``/``false``, strings and integers stand for themselves;
- ``{"float": 0.5}``, or ``{"float": "inf"}`` / ``"-inf"`` / ``"nan"``: a float, always tagged, so
  that no JSON reader can take 1.0 for the integer 1;
- ``{"list": [...]}``, ``{"tuple": [...]}``;
- ``{"dict": [[key, value], ...]}``: keys are nodes too (optimizer state dicts key by int), in
  insertion order;
- ``{"tensor": name}`` with ``"device"`` (when not the CPU), ``"requires_grad": true`` and
  ``"parameter": true`` when they apply; ``{"ndarray": name}``;
- ``{"dtype": "float32"}``: a numpy dtype (zgrad's dtypes are numpy dtypes).

A tensor's name is the path of keys and indices that leads to it, joined by dots
(``MODEL_STATE.fc.weight``), so that a module's state dict saved alone has the names its
``load_state_dict`` expects; a name already taken gets ``#1``, ``#2`` appended. One tensor
object met twice is stored once and comes back as one object.
"""

from __future__ import annotations

import math
import types
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from zgrad.errors import CheckpointError
from zgrad.nn.module import Parameter
from zgrad.serialization.layout import dtype_name
from zgrad.tensor import Tensor

__all__ = ["FORMAT_VERSION", "Flattened", "flatten", "rebuild"]

FORMAT_VERSION = 1

SUPPORTED = ("tensors, numpy arrays of numeric or bool dtype, dicts, lists, tuples, str, int, float, bool, None "
             "and numpy dtypes")
_NON_FINITE = {"inf": math.inf, "-inf": -math.inf, "nan": math.nan}


@dataclass
class Flattened:
    """A saved object as a JSON-ready tree, plus the arrays it references by name."""

    tree: Any = None
    arrays: dict[str, Any] = field(default_factory=dict)


def flatten(obj: Any) -> Flattened:
    """``obj`` as a :class:`Flattened` (arrays not copied).

    Raises:
        TypeError: a value zgrad cannot store, naming its place (``obj['MODEL']['fc']``).
        ValueError: a container that contains itself.
    """
    result = Flattened()
    result.tree = _Flattener(result.arrays).node(obj, ())
    return result


class _Flattener:
    def __init__(self, arrays: dict[str, Any]) -> None:
        self.arrays = arrays
        self.seen: dict[int, dict] = {}  # id of a tensor or array -> its node
        self.open: set[int] = set()      # ids of the containers being flattened (cycle check)

    def node(self, value: Any, path: tuple) -> Any:
        if value is None or isinstance(value, (bool, str)):
            return value
        if isinstance(value, (int, np.integer)) and not isinstance(value, np.bool_):
            return int(value)
        if isinstance(value, np.bool_):
            return bool(value)
        if isinstance(value, (float, np.floating)):
            value = float(value)
            return {"float": value if math.isfinite(value) else repr(value)}
        if isinstance(value, np.dtype):
            return {"dtype": value.name}
        if isinstance(value, (Tensor, np.ndarray)):
            return self.array_node(value, path)
        if isinstance(value, (dict, list, tuple)) and not hasattr(value, "_fields"):
            if id(value) in self.open:
                raise ValueError(f"zgrad.save: the {type(value).__name__} at {_where(path)} contains itself; "
                                 "a checkpoint holds trees, not cycles")
            self.open.add(id(value))
            try:
                if isinstance(value, dict):
                    return {"dict": [[self.key(k, path), self.node(v, path + (k,))] for k, v in value.items()]}
                kind = "list" if isinstance(value, list) else "tuple"
                return {kind: [self.node(v, path + (i,)) for i, v in enumerate(value)]}
            finally:
                self.open.discard(id(value))
        raise TypeError(f"zgrad.save cannot store {_describe(value)} at {_where(path)}: a checkpoint holds "
                        f"{SUPPORTED} (no pickle){_hint(value)}")

    def key(self, key: Any, path: tuple) -> Any:
        if isinstance(key, (Tensor, np.ndarray)):
            raise TypeError(f"zgrad.save cannot store a {type(key).__name__} as a dict key at {_where(path)}")
        return self.node(key, path + ("<key>",))

    def array_node(self, value: Any, path: tuple) -> dict:
        if id(value) in self.seen:
            return self.seen[id(value)]
        array = value._data if isinstance(value, Tensor) else value
        if dtype_name(array.dtype) is None:
            raise TypeError(f"zgrad.save cannot store the {type(value).__name__} of dtype {array.dtype} at "
                            f"{_where(path)}: checkpoints hold bool, integer and float arrays")
        name = self.free_name(".".join(str(p) for p in path) or "tensor")
        self.arrays[name] = array
        if isinstance(value, np.ndarray):
            node = {"ndarray": name}
        else:
            node = {"tensor": name}
            if value.device.type != "cpu":
                node["device"] = str(value.device)
            if value.requires_grad:
                node["requires_grad"] = True
            if isinstance(value, Parameter):
                node["parameter"] = True
        self.seen[id(value)] = node
        return node

    def free_name(self, name: str) -> str:
        candidate, n = name, 0
        while candidate in self.arrays:
            n += 1
            candidate = f"{name}#{n}"
        return candidate


def _where(path: tuple) -> str:
    return "obj" + "".join(f"[{p!r}]" for p in path)


def _describe(value: Any) -> str:
    if isinstance(value, types.FunctionType) and value.__name__ == "<lambda>":
        return "a lambda"
    if hasattr(value, "_fields"):
        return f"the namedtuple {type(value).__name__}"
    return f"a {type(value).__name__} object"


def _hint(value: Any) -> str:
    if hasattr(value, "state_dict"):
        return "; save its state_dict() instead"
    if hasattr(value, "_fields"):
        return "; save value._asdict() instead"
    return ""


def rebuild(tree: Any, make_tensor: Callable[[dict], Tensor], make_ndarray: Callable[[str], np.ndarray],
            source: str) -> Any:
    """The object a structure tree describes; ``make_tensor(node)`` and ``make_ndarray(name)``
    supply the referenced values, once per name (a name met twice gives one object).

    Raises:
        CheckpointError: a node of no known form, naming where it is.
    """
    made: dict[str, Any] = {}

    def build(node: Any, path: tuple) -> Any:
        if node is None or isinstance(node, (bool, str, int, float)):
            return node
        if isinstance(node, dict) and len(node) >= 1:
            if "float" in node:
                value = node["float"]
                return _NON_FINITE[value] if isinstance(value, str) and value in _NON_FINITE else float(value)
            if "list" in node:
                return [build(v, path + (i,)) for i, v in enumerate(node["list"])]
            if "tuple" in node:
                return tuple(build(v, path + (i,)) for i, v in enumerate(node["tuple"]))
            if "dict" in node:
                return {build(k, path + ("<key>",)): build(v, path + (i,)) for i, (k, v) in enumerate(node["dict"])}
            if "dtype" in node:
                return np.dtype(node["dtype"])
            if "tensor" in node or "ndarray" in node:
                name = node.get("tensor", node.get("ndarray"))
                if name not in made:
                    try:
                        made[name] = make_tensor(node) if "tensor" in node else make_ndarray(name)
                    except Exception as exc:  # the supplier's own error, not a malformed node
                        raise _SupplierError() from exc
                return made[name]
        raise CheckpointError(f"{source} is damaged: its structure holds {str(node)[:80]!r} at {_where(path)}, "
                              "which is no value of checkpoint format 1")

    try:
        return build(tree, ())
    except _SupplierError as wrapper:
        raise wrapper.__cause__ from None
    except (TypeError, ValueError, KeyError) as exc:
        raise CheckpointError(f"{source} is damaged: its structure does not parse ({exc})") from None


class _SupplierError(Exception):
    """Carries an error of ``make_tensor``/``make_ndarray`` (a bad ``map_location``, no CUDA) out
    of :func:`rebuild` untouched, past the handler that reports malformed nodes."""

