"""One cell of the conformance table: a row of the table run with one dtype on one device, on
zgrad and on PyTorch with the same inputs, and the verdict.

The inputs are numpy arrays built once per cell (reproducibly, from the row's id and the dtype)
and handed to both libraries. A library's outcome is its result (tensors as numpy arrays with
their dtype, shape and device; tuples element by element; Python numbers as they are) or the
exception it raised. zgrad passes a cell when its outcome matches PyTorch's, or when both refuse
the input and zgrad's exception is an instance of PyTorch's exception type. In float64, a row
marked ``grad`` also compares the gradients of every floating tensor argument, with PyTorch's and
with central finite differences of zgrad's own forward.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

import zgrad
from helpers import central_differences
from row import Dtype, Lit, Row, Scalar, T

try:  # the reference, where installed
    import torch
except ImportError:  # pragma: no cover - depends on the environment
    torch = None

__all__ = ["Verdict", "run_cell"]

# Value tolerances by dtype (rtol, atol): kernels differ from PyTorch's in summation order and in
# their transcendental functions by a few ulp; the half types are compared at their precision.
TOLERANCE = {
    "float16": (2e-3, 2e-3), "bfloat16": (1.6e-2, 1e-2), "float32": (2e-5, 2e-6), "float64": (1e-9, 1e-12),
}
FD_TOLERANCE = (1e-5, 1e-6)

_FLOAT_VALUES = {  # domain -> (low, high) of uniform draws, |x| for "nonzero"
    "real": (-2.0, 2.0), "positive": (0.5, 2.5), "nonzero": (0.5, 2.0), "unit": (-0.9, 0.9), "above1": (1.1, 3.0),
    "probability": (0.05, 0.95),
}
_INT_VALUES = {"real": (-5, 6), "positive": (1, 6), "nonzero": (1, 6), "unit": (-1, 2), "above1": (2, 6),
               "probability": (0, 2)}
_SCALARS = {
    "b": {"real": True, "positive": True, "nonzero": True, "unit": False, "above1": True},
    "i": {"real": 3, "positive": 2, "nonzero": 2, "unit": 1, "above1": 2},
    "f": {"real": -1.5, "positive": 1.5, "nonzero": -1.25, "unit": 0.5, "above1": 1.5, "probability": 0.25},
}
# The "edges" domain: these values in turn (a row's shape takes as many as it holds).
_FLOAT_EDGES = (0.0, -0.0, -1.0, -2.0, -3.0, 0.5, -0.5, 1.0, 2.0, -2.5, 1e-30, 30.5, -30.5, 100.0, np.inf, -np.inf,
                np.nan)
_INT_EDGES = (0, -1, -2, -3, 1, 2, 3, 5, 7, 12, 100)


@dataclass(frozen=True)
class Verdict:
    """A cell's result: ``status`` is "ok" (agrees with PyTorch), "refused" (both refuse the
    input, zgrad with an instance of PyTorch's exception type) or "fail"; ``detail`` says why."""

    status: str
    detail: str = ""

    @property
    def passed(self) -> bool:
        return self.status in ("ok", "refused")


def _kind(dtype: str) -> str:
    return "b" if dtype == "bool" else "f" if dtype.startswith(("float", "bfloat")) else "i"


# --- inputs ----------------------------------------------------------------------------------------

def _values(rng: np.random.Generator, shape: tuple[int, ...], dtype: str, domain: str, high: int | None) -> np.ndarray:
    """An array of ``shape`` with values from ``domain``, in ``dtype`` (float32 carries bfloat16)."""
    return np.asarray(_draw(rng, shape, dtype, domain, high), dtype=_storage(dtype))


def _draw(rng: np.random.Generator, shape: tuple[int, ...], dtype: str, domain: str, high: int | None) -> Any:
    n = int(np.prod(shape, dtype=np.int64))
    kind = _kind(dtype)
    if domain == "edges":
        edges = _FLOAT_EDGES if kind == "f" else np.abs(_INT_EDGES) if dtype == "uint8" else _INT_EDGES
        return np.resize(np.asarray(edges if kind != "b" else (False, True)), shape).astype(_storage(dtype))
    if domain == "mask" or kind == "b":
        values = rng.random(shape) < 0.5 if domain in ("real", "mask", "distinct", "index") else np.ones(shape, bool)
        return values if dtype == "bool" else values.astype(_storage(dtype))
    if domain == "index":
        return rng.integers(0, high if high is not None else 3, size=shape).astype(_storage(dtype))
    if domain == "distinct":
        order = rng.permutation(n).reshape(shape)
        if kind == "i":
            return (order if dtype == "uint8" else order - n // 2).astype(_storage(dtype))
        return (order * 0.37 - n * 0.15).astype(_storage(dtype))
    if kind == "i":
        low, top = _INT_VALUES[domain]
        if dtype == "uint8":
            low = max(low, 0)
        values = rng.integers(low, top, size=shape)
        if domain == "nonzero":
            values = values * rng.choice([-1, 1], size=shape) if dtype != "uint8" else values
        return values.astype(_storage(dtype))
    low, top = _FLOAT_VALUES[domain]
    values = rng.uniform(low, top, size=shape)
    if domain == "nonzero":
        values = values * rng.choice([-1.0, 1.0], size=shape)
    return values.astype(_storage(dtype))


def _storage(dtype: str) -> np.dtype:
    """The numpy dtype that carries ``dtype``'s values (bfloat16 values live in float32)."""
    return np.dtype(np.float32) if dtype == "bfloat16" else np.dtype(dtype)


@dataclass(frozen=True)
class _Built:
    """A cell's arguments as data: arrays for tensors (with their dtype name), plain values else."""

    args: tuple
    kwargs: dict


def _build(row: Row, dtype: str) -> _Built:
    rng = np.random.default_rng(zlib.crc32(f"{row.id}/{dtype}".encode()))

    def one(kind: Any) -> Any:
        if isinstance(kind, T):
            arg_dtype = kind.dtype or dtype
            shape = row.shape if kind.shape is None else kind.shape
            return ("tensor", _values(rng, shape, arg_dtype, kind.domain or row.domain, kind.high), arg_dtype, kind.grad)
        if isinstance(kind, Scalar):
            value = _SCALARS[_kind(dtype)].get(row.domain, _SCALARS[_kind(dtype)]["real"]) if kind.value is None \
                else kind.value
            return ("value", {"b": bool, "i": int, "f": float}[_kind(dtype)](value))
        if isinstance(kind, Dtype):
            return ("dtype", dtype)
        if isinstance(kind, Lit):
            return ("value", kind.value)
        if isinstance(kind, (tuple, list)):
            return ("seq", [one(k) for k in kind])
        raise TypeError(f"row {row.id}: an argument must be T, Scalar, Lit or Dtype, got {kind!r}")

    return _Built(tuple(one(a) for a in row.args), {k: one(v) for k, v in row.kwargs.items()})


# --- running a library -----------------------------------------------------------------------------

class _Library:
    """How one library makes tensors and dtypes, and reads results back."""

    def __init__(self, lib: Any, device: str):
        self.lib = lib
        self.device = device

    def dtype(self, name: str) -> Any:
        return getattr(self.lib, name)

    def tensor(self, array: np.ndarray, dtype: str, requires_grad: bool) -> Any:
        if self.lib is zgrad:
            t = zgrad.tensor(array.copy())
            if dtype == "bfloat16":
                t = t.to(zgrad.bfloat16)
            if self.device != "cpu":
                t = t.to(self.device)
        else:
            t = torch.from_numpy(array.copy()).to(getattr(torch, dtype))
        return t.requires_grad_() if requires_grad else t

    def is_tensor(self, x: Any) -> bool:
        return isinstance(x, self.lib.Tensor)

    def to_numpy(self, t: Any) -> tuple[np.ndarray, str, str]:
        """(values, dtype name, device type) of a result tensor; bfloat16 values widen to float32."""
        name = str(t.dtype).removeprefix("torch.")
        t = t.detach()
        if name == "bfloat16":
            t = t.float() if self.lib is torch else t.to(zgrad.float32)
        values = t.cpu().numpy(force=True) if self.lib is torch else t.cpu().numpy()  # force: torch's ZeroTensor
        return np.asarray(values), name, t.device.type


def _materialize(library: _Library, built: _Built, grad: bool) -> tuple[tuple, dict, list]:
    """The library's arguments, and the tensors whose gradients the cell checks."""
    leaves = []

    def one(item: tuple) -> Any:
        tag = item[0]
        if tag == "tensor":
            _, array, dtype, wants_grad = item
            needs = grad and _is_checked(item)
            t = library.tensor(array, dtype, needs)
            if needs:
                leaves.append(t)
            return t
        if tag == "dtype":
            return library.dtype(item[1])
        if tag == "seq":
            return [one(i) for i in item[1]]
        return item[1]

    return tuple(one(a) for a in built.args), {k: one(v) for k, v in built.kwargs.items()}, leaves


def _resolve(lib: Any, op: str, args: tuple) -> tuple[Callable[..., Any], tuple]:
    """The callable for ``op`` and the arguments it takes ("Tensor.x" binds the first argument)."""
    if op.startswith("Tensor."):
        return getattr(args[0], op.removeprefix("Tensor.")), args[1:]
    target = lib
    for part in op.split("."):
        target = getattr(target, part)
    return target, args


@dataclass
class _Outcome:
    result: Any = None
    error: BaseException | None = None


def _call(library: _Library, row: Row, args: tuple, kwargs: dict) -> _Outcome:
    try:
        fn, rest = _resolve(library.lib, row.op, args)
        result = fn(*rest, **kwargs)
        if _in_place(row):
            if result is not args[0]:
                return _Outcome(error=AssertionError(f"{row.op} returned a new object, not self"))
        return _Outcome(result=result)
    except Exception as e:  # noqa: BLE001 - every refusal is an outcome to compare
        return _Outcome(error=e)


# --- comparing ------------------------------------------------------------------------------------

def _normalize(library: _Library, value: Any) -> Any:
    if library.is_tensor(value):
        return ("tensor", *library.to_numpy(value))
    if isinstance(value, (tuple, list)):
        return ("seq", [_normalize(library, v) for v in value])
    if library.lib is torch and isinstance(value, torch.dtype):
        return ("value", str(value).removeprefix("torch."))
    if isinstance(value, np.dtype):
        return ("value", str(value))
    if isinstance(value, (bool, int, float, np.generic)):
        return ("value", value.item() if isinstance(value, np.generic) else value)
    return ("value", value)


def _difference(got: Any, want: Any, rtol: float, atol: float, where: str = "result") -> str:
    """'' when ``got`` (zgrad's normalized result) matches ``want`` (torch's), else what differs."""
    if got[0] != want[0]:
        return f"{where}: zgrad gives a {got[0]}, torch a {want[0]}"
    if got[0] == "seq":
        if len(got[1]) != len(want[1]):
            return f"{where}: zgrad gives {len(got[1])} items, torch {len(want[1])}"
        for i, (g, w) in enumerate(zip(got[1], want[1])):
            found = _difference(g, w, rtol, atol, f"{where}[{i}]")
            if found:
                return found
        return ""
    if got[0] == "value":
        g, w = got[1], want[1]
        if type(g) is not type(w) and not (isinstance(g, (int, float)) and isinstance(w, (int, float))
                                           and not isinstance(g, bool) and not isinstance(w, bool)):
            return f"{where}: zgrad gives {g!r} ({type(g).__name__}), torch {w!r} ({type(w).__name__})"
        if isinstance(g, float) and isinstance(w, float):
            return "" if np.isclose(g, w, rtol=rtol, atol=atol, equal_nan=True) else f"{where}: zgrad {g!r}, torch {w!r}"
        return "" if g == w else f"{where}: zgrad {g!r}, torch {w!r}"
    _, g, g_dtype, g_device = got
    _, w, w_dtype, w_device = want
    if g_dtype != w_dtype:
        return f"{where}: dtype {g_dtype}, torch gives {w_dtype}"
    if g.shape != w.shape:
        return f"{where}: shape {list(g.shape)}, torch gives {list(w.shape)}"
    if g_device != w_device:
        return f"{where}: device {g_device}, torch gives {w_device}"
    if g.dtype.kind in "biu":
        return "" if np.array_equal(g, w) else f"{where}: values differ: zgrad {g.tolist()}, torch {w.tolist()}"
    if not np.allclose(g, w, rtol=rtol, atol=atol, equal_nan=True):
        worst = np.nanmax(np.abs(g.astype(np.float64) - w.astype(np.float64))) if g.size else 0.0
        return f"{where}: values differ by up to {worst:.3g} (rtol {rtol}, atol {atol})"
    return ""


def _floating_outputs(library: _Library, result: Any) -> list:
    if library.is_tensor(result):
        kind = str(result.dtype).removeprefix("torch.")
        return [result] if kind.startswith(("float", "bfloat")) else []
    if isinstance(result, (tuple, list)):
        return [t for r in result for t in _floating_outputs(library, r)]
    return []


def _upstreams(row: Row, outputs: list) -> list[np.ndarray]:
    rng = np.random.default_rng(zlib.crc32(f"{row.id}/upstream".encode()))
    return [rng.standard_normal(tuple(o.shape)) for o in outputs]


def _gradients(library: _Library, row: Row, built: _Built) -> tuple[list[np.ndarray], list[np.ndarray]] | str:
    """(gradient of each checked input, the upstream gradients used), or why there are none."""
    args, kwargs, leaves = _materialize(library, built, grad=True)
    if not leaves:
        return "no floating argument"
    outcome = _call(library, row, args, kwargs)
    if outcome.error is not None:
        return f"the forward raised {type(outcome.error).__name__}: {outcome.error}"
    outputs = _floating_outputs(library, outcome.result)  # every one gets an upstream, by position
    if not any(out.requires_grad for out in outputs):
        return "no differentiable output"
    upstreams = _upstreams(row, outputs)
    total = None
    for out, up in zip(outputs, upstreams):
        if not out.requires_grad:  # a floating output the op does not differentiate (slogdet's sign)
            continue
        term = (out * library.tensor(up, "float64", False)).sum()
        total = term if total is None else total + term
    try:
        total.backward()
    except Exception as e:  # noqa: BLE001 - a library that cannot differentiate the op says so
        return f"the backward raised {type(e).__name__}: {e}"
    grads = [np.zeros(leaf.shape) if leaf.grad is None else library.to_numpy(leaf.grad)[0] for leaf in leaves]
    return grads, upstreams


def _is_checked(item: tuple) -> bool:
    """Whether a built argument is a float64 tensor whose gradient the cell checks."""
    return item[0] == "tensor" and item[2] == "float64" and item[3]


def _with_checked(built: _Built, replace: Callable[[int, tuple], tuple]) -> _Built:
    """``built`` with each checked tensor item replaced by ``replace(k, item)``, k counting them in
    the order :func:`_materialize` makes its leaves (arguments, then keywords, depth first)."""
    count = [0]

    def one(item: tuple) -> tuple:
        if item[0] == "seq":
            return ("seq", [one(i) for i in item[1]])
        if _is_checked(item):
            count[0] += 1
            return replace(count[0] - 1, item)
        return item

    return _Built(tuple(one(a) for a in built.args), {k: one(v) for k, v in built.kwargs.items()})


def _finite_differences(row: Row, built: _Built, upstreams: list[np.ndarray]) -> list[np.ndarray]:
    """Central differences of sum(outputs * upstreams) over each checked float64 argument of zgrad."""
    library = _Library(zgrad, "cpu")
    arrays: list[np.ndarray] = []
    _with_checked(built, lambda k, item: arrays.append(item[1].astype(np.float64).copy()) or item)

    def objective() -> float:
        current = _with_checked(built, lambda k, item: ("tensor", arrays[k], *item[2:]))
        with zgrad.no_grad():
            plain_args, plain_kwargs, _ = _materialize(library, current, grad=False)
            outcome = _call(library, row, plain_args, plain_kwargs)
        outputs = _floating_outputs_plain(outcome.result)
        return float(sum(np.sum(np.asarray(o.numpy(), np.float64) * u) for o, u in zip(outputs, upstreams)))

    return central_differences(objective, arrays)


def _floating_outputs_plain(result: Any) -> list:
    if isinstance(result, zgrad.Tensor):
        return [result] if result.dtype.kind == "f" else []
    if isinstance(result, (tuple, list)):
        return [t for r in result for t in _floating_outputs_plain(r)]
    return []


def _check_gradients(row: Row, built: _Built, device: str) -> str:
    """'' when zgrad's float64 gradients match torch's and finite differences, else what differs."""
    ours = _gradients(_Library(zgrad, device), row, built)
    if isinstance(ours, str):
        return "" if ours in ("no floating argument", "no differentiable output") else f"gradient: {ours}"
    grads, upstreams = ours
    rtol, atol = TOLERANCE["float64"]
    theirs = _gradients(_Library(torch, "cpu"), row, built) if torch is not None else "torch is not installed"
    if not isinstance(theirs, str):  # else torch cannot differentiate it: finite differences alone judge
        for i, (g, w) in enumerate(zip(grads, theirs[0])):
            if g.shape != w.shape or not np.allclose(g, w, rtol=rtol, atol=max(atol, 1e-10), equal_nan=True):
                return f"gradient of tensor argument {i} differs from torch's"
    expected = _finite_differences(row, built, upstreams)
    for i, (g, w) in enumerate(zip(grads, expected)):
        if not np.allclose(g, w, rtol=FD_TOLERANCE[0], atol=FD_TOLERANCE[1]):
            return f"gradient of tensor argument {i} differs from finite differences"
    return ""


def _in_place(row: Row) -> bool:
    """Whether the row calls an in-place method (``Tensor.add_``, not ``Tensor.__add__``)."""
    return row.op.startswith("Tensor.") and row.op.endswith("_") and not row.op.endswith("__")


def _refuses_alike(ours: BaseException, theirs: BaseException) -> bool:
    """zgrad's exception is an instance of torch's type; where torch raises NotImplementedError
    (its "not implemented for 'Bool'" dtype refusals, a RuntimeError subclass) any RuntimeError;
    where torch raises a private RuntimeError subclass, zgrad's RuntimeError of the same name."""
    if type(theirs) is NotImplementedError:
        return isinstance(ours, RuntimeError)
    if type(theirs).__name__.lstrip("_") == type(ours).__name__ and isinstance(ours, RuntimeError):
        return True  # torch's private classes (torch._C._LinAlgError) and zgrad's public one of that name
    return isinstance(ours, type(theirs))


def run_cell(row: Row, dtype: str, device: str = "cpu") -> Verdict:
    """Run ``row`` with ``dtype`` on ``device`` (zgrad's; PyTorch runs on the CPU) and judge it.

    Needs torch; the float64 gradient check also runs finite differences.
    """
    built = _build(row, dtype)
    ours_lib, theirs_lib = _Library(zgrad, device), _Library(torch, "cpu")
    ours = _call(ours_lib, row, *_materialize(ours_lib, built, grad=False)[:2])
    theirs = _call(theirs_lib, row, *_materialize(theirs_lib, built, grad=False)[:2])
    if theirs.error is not None:
        if ours.error is None:
            return Verdict("fail", f"torch refuses ({type(theirs.error).__name__}: {theirs.error}) but zgrad accepts")
        if _refuses_alike(ours.error, theirs.error):
            return Verdict("refused", f"{type(theirs.error).__name__}: {theirs.error}")
        return Verdict("fail", f"torch raises {type(theirs.error).__name__}, zgrad "
                               f"{type(ours.error).__name__}: {ours.error}")
    if ours.error is not None:
        return Verdict("fail", f"zgrad raises {type(ours.error).__name__}: {ours.error}")
    rtol, atol = TOLERANCE.get(dtype, (1e-5, 1e-6))
    rtol, atol = row.rtol if row.rtol is not None else rtol, row.atol if row.atol is not None else atol
    got, want = _normalize(ours_lib, ours.result), _on_device(_normalize(theirs_lib, theirs.result), device)
    if not row.values:
        got, want = _without_values(got), _without_values(want)
    found = _difference(got, want, rtol, atol)
    if found:
        return Verdict("fail", found)
    if row.grad and dtype == "float64" and not _in_place(row):
        found = _check_gradients(row, built, device)
        if found:
            return Verdict("fail", found)
    return Verdict("ok")


def _on_device(normalized: Any, device: str) -> Any:
    """torch's normalized result as if it ran on zgrad's ``device`` (torch runs on the CPU)."""
    if normalized[0] == "tensor":
        return (*normalized[:3], device)
    if normalized[0] == "seq":
        return ("seq", [_on_device(v, device) for v in normalized[1]])
    return normalized


def _without_values(normalized: Any) -> Any:
    """A normalized result with tensor values blanked (random ops: dtype, shape and device only)."""
    if normalized[0] == "tensor":
        return ("tensor", np.zeros(normalized[1].shape, normalized[1].dtype), *normalized[2:])
    if normalized[0] == "seq":
        return ("seq", [_without_values(v) for v in normalized[1]])
    return normalized
