"""The conformance table's vocabulary: a :class:`Row` names an op, how to build its arguments and
which dtypes to try. Rows are data: the ``rows_*.py`` modules of this directory each hold a list
``ROWS``; the runner turns every row x dtype into a case, runs it on zgrad and on PyTorch with the
same inputs, and compares result values, dtype, device and shape, or the exception type where
PyTorch refuses the input; in float64 it also compares gradients (with PyTorch's, and with finite
differences).

Argument kinds, in ``Row.args`` and as values of ``Row.kwargs``:

- :class:`T`: a tensor. By default of the row's shape, of the dtype under test, with values from
  the row's domain; each of those can be fixed per argument (an int64 index, a second operand of a
  broadcastable shape, a 0-dim tensor with ``shape=()``).
- :class:`Scalar`: a Python number of the kind of the dtype under test (bool, int or float).
- :class:`Lit`: a value passed as it is (a dim, a tuple of sizes, a mode string, a float).
- :class:`Dtype`: the dtype under test as a dtype object (``zgrad.float32`` / ``torch.float32``),
  for ``dtype=`` arguments of creation ops.
- a tuple of kinds: one list argument of those (the tensors of ``cat``, ``stack``, ``hstack``).

Domains (values a generated tensor or scalar takes; integers and bools get the nearest sensible
values): ``"real"`` any sign; ``"positive"`` > 0; ``"nonzero"`` away from 0; ``"unit"`` inside
(-1, 1); ``"above1"`` > 1; ``"distinct"`` no two elements equal (so sort/topk indices agree);
``"index"`` integers in [0, ``T.high``); ``"mask"`` random bools; ``"probability"`` inside
(0, 1); ``"edges"`` the special values of a dtype in turn, not drawn (floats: signed zeros,
negative integers, halves, large values, +-inf, NaN; integers: 0, negatives, small positives).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["ALL_DTYPES", "FLOAT_DTYPES", "INT_DTYPES", "Dtype", "Lit", "Row", "Scalar", "T"]

INT_DTYPES = ("uint8", "int8", "int16", "int32", "int64")
FLOAT_DTYPES = ("float16", "bfloat16", "float32", "float64")
ALL_DTYPES = ("bool", *INT_DTYPES, *FLOAT_DTYPES)

DOMAINS = ("real", "positive", "nonzero", "unit", "above1", "distinct", "index", "mask", "probability", "edges")


@dataclass(frozen=True)
class T:
    """A tensor argument; a field left None takes the row's value (shape, domain) or the dtype
    under test. ``grad=False`` keeps a floating argument out of the gradient check."""

    shape: tuple[int, ...] | None = None
    dtype: str | None = None
    domain: str | None = None
    high: int | None = None
    grad: bool = True


@dataclass(frozen=True)
class Scalar:
    """A Python number of the dtype under test's kind; ``value`` fixes it (cast to that kind)."""

    value: Any = None


@dataclass(frozen=True)
class Lit:
    """A literal argument, passed unchanged to both libraries."""

    value: Any


@dataclass(frozen=True)
class Dtype:
    """The dtype under test, as the library's dtype object."""


@dataclass(frozen=True)
class Row:
    """One op of the table.

    Attributes:
        op: the callable's dotted path under ``zgrad`` / ``torch`` ("sin", "linalg.vector_norm",
            "nn.functional.pad"); "Tensor.name" calls the method on the first argument, and a
            name ending in "_" (``"Tensor.sin_"``) is an in-place method, checked on a copy.
        args: positional arguments (argument kinds above).
        kwargs: keyword arguments (argument kinds above).
        dtypes: the dtypes tried (names from ``ALL_DTYPES``).
        shape: the shape of a :class:`T` argument that does not fix its own.
        domain: the domain of generated values (``DOMAINS``).
        grad: check gradients in float64 (for ops differentiable in their floating arguments).
        values: compare values (False for random ops: dtype, shape and device only).
        name: tells apart rows of the same op in test ids ("sin" and "sin-3d").
        rtol, atol: override the dtype's tolerance for this row (None: the dtype's).
    """

    op: str
    args: tuple = (T(),)
    kwargs: dict = field(default_factory=dict)
    dtypes: tuple[str, ...] = ALL_DTYPES
    shape: tuple[int, ...] = (3, 4)
    domain: str = "real"
    grad: bool = True
    values: bool = True
    name: str = ""
    rtol: float | None = None
    atol: float | None = None

    def __post_init__(self) -> None:
        if self.domain not in DOMAINS:
            raise ValueError(f"Row {self.op!r}: domain {self.domain!r} is not one of {DOMAINS}")
        unknown = set(self.dtypes) - set(ALL_DTYPES)
        if unknown:
            raise ValueError(f"Row {self.op!r}: unknown dtypes {sorted(unknown)}; expected names from {ALL_DTYPES}")

    @property
    def id(self) -> str:
        """The row's test id: its op, or its op and name."""
        return f"{self.op}-{self.name}" if self.name else self.op
