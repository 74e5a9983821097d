"""What a collective is, in the words ranks compare: ``ReduceOp``, the dtypes, the fingerprint.

Every message of a collective carries its fingerprint (collective, reduction, dtype, shape,
root) next to the group and sequence number, so ranks that called different collectives find
out from the first message they exchange, and say what each called.
"""

from __future__ import annotations

import enum
from typing import Any, NamedTuple

import numpy as np

from zgrad.kernels.promotion import BFLOAT16

__all__ = ["ReduceOp", "Fingerprint", "DTYPES", "check_dtype", "as_reduce_op"]

DTYPES = tuple(np.dtype(t) for t in (np.float32, np.float64, np.int32, np.int64, np.float16)) + (BFLOAT16,)


class ReduceOp(enum.Enum):
    """How ``all_reduce``, ``reduce`` and ``reduce_scatter`` combine the ranks' tensors.

    ``AVG`` is the sum divided by the group size (integers truncate toward zero), so a float
    result is bit-identical to a sum followed by a division. Integer results are exact.
    """

    SUM = "sum"
    AVG = "avg"
    PRODUCT = "product"
    MIN = "min"
    MAX = "max"

    def __repr__(self) -> str:
        return f"ReduceOp.{self.name}"


def as_reduce_op(op: Any) -> ReduceOp:
    """``op`` as a :class:`ReduceOp` (also from its name, e.g. ``"sum"``).

    Raises:
        ValueError: not a reduction zgrad supports.
    """
    if isinstance(op, ReduceOp):
        return op
    name = getattr(op, "name", op)
    if isinstance(name, str) and name.upper() in ReduceOp.__members__:
        return ReduceOp[name.upper()]
    raise ValueError(f"unsupported reduction {op!r}; expected one of ReduceOp.{', ReduceOp.'.join(ReduceOp.__members__)}")


def check_dtype(array: np.ndarray, what: str) -> None:
    """Raise TypeError naming ``what`` if ``array``'s dtype is not one the collectives move."""
    if array.dtype not in DTYPES:
        raise TypeError(f"{what} has dtype {array.dtype}; collectives support {', '.join(d.name for d in DTYPES)}")


class Fingerprint(NamedTuple):
    """What one rank called: compared field by field with every message of the collective.

    Attributes:
        collective: the function's name (``"all_reduce"``), or an internal label (DDP's).
        reduce_op: the reduction's name, or ``""``.
        dtype: the tensors' dtype name, or ``""``.
        shape: the shape of the tensor each rank contributes.
        root: the group rank of ``src``/``dst`` for rooted collectives, else -1.
        algorithm: how the data moves (``"ring/65536"``: ring in chunks of 65536 elements),
            which follows from the size and ``[ddp]`` settings: ranks whose settings differ
            would otherwise exchange chunks that do not fit.
    """

    collective: str
    reduce_op: str
    dtype: str
    shape: tuple[int, ...]
    root: int
    algorithm: str = ""

    def to_wire(self) -> list:
        return [self.collective, self.reduce_op, self.dtype, list(self.shape), self.root, self.algorithm]

    def describe(self, seq: int) -> str:
        """``all_reduce(SequenceNumber=3, ReduceOp=SUM, TensorShape=[4], TensorDtype=float32)``."""
        parts = [f"SequenceNumber={seq}"]
        if self.reduce_op:
            parts.append(f"ReduceOp={self.reduce_op.upper()}")
        if self.root >= 0:
            parts.append(f"Root={self.root}")
        if self.dtype:
            parts.append(f"TensorShape={list(self.shape)}")
            parts.append(f"TensorDtype={self.dtype}")
        if self.algorithm:
            parts.append(f"Algorithm={self.algorithm}")
        return f"{self.collective}({', '.join(parts)})"
