"""``zgrad.autograd.Variable``: PyTorch's pre-0.4 wrapper, kept for old programs as PyTorch keeps it.

Every tensor is a Variable (``isinstance(t, Variable)`` holds for any tensor), and
``Variable(t, requires_grad=...)`` returns a new leaf that shares ``t``'s memory, as PyTorch's does.
"""

from __future__ import annotations

import warnings
from typing import Any

from zgrad.creation import empty
from zgrad.tensor import Tensor

__all__ = ["Variable"]


class _VariableMeta(type):
    def __instancecheck__(cls, instance: Any) -> bool:
        return isinstance(instance, Tensor)


class Variable(metaclass=_VariableMeta):
    """``Variable(data, requires_grad=False, volatile=False)``: ``data`` as a new leaf tensor
    sharing its memory, that requires grad if asked (``volatile`` is gone, as in PyTorch: it warns
    and has no effect).

    Raises:
        TypeError: ``data`` is not a tensor (PyTorch's message).
    """

    def __new__(cls, data: Any = None, requires_grad: bool = False, volatile: bool = False) -> Any:  # type: ignore[misc]
        if volatile:
            warnings.warn("volatile was removed (Variable.volatile is always False)", UserWarning, stacklevel=2)
        if data is None:
            data = empty(0)
        if not isinstance(data, Tensor):
            raise TypeError(f"Variable data has to be a tensor, but got {type(data).__name__}")
        return data.detach().requires_grad_(requires_grad)
