"""Padding modules, as PyTorch's: ``ZeroPad{1,2,3}d``, ``ConstantPad{1,2,3}d``,
``ReflectionPad{1,2,3}d``, ``ReplicationPad{1,2,3}d`` and ``CircularPad{1,2,3}d``, each
:func:`zgrad.nn.functional.pad` with its mode over the last 1, 2 or 3 dimensions."""

from __future__ import annotations

from typing import Any

from zgrad.nn.module import Module
from zgrad.ops.padding import pad

__all__ = [
    "CircularPad1d", "CircularPad2d", "CircularPad3d", "ConstantPad1d", "ConstantPad2d", "ConstantPad3d",
    "ReflectionPad1d", "ReflectionPad2d", "ReflectionPad3d", "ReplicationPad1d", "ReplicationPad2d",
    "ReplicationPad3d", "ZeroPad1d", "ZeroPad2d", "ZeroPad3d",
]


class _PadNd(Module):
    """Pads the last ``dims`` dimensions by ``padding``: an int for every side, or
    (left, right[, top, bottom[, front, back]])."""

    mode = ""
    dims = 0

    def __init__(self, padding: Any) -> None:
        super().__init__()
        sides = 2 * self.dims
        if isinstance(padding, int):
            self.padding = (padding,) * sides
        else:
            self.padding = tuple(padding)
            if len(self.padding) != sides:
                raise ValueError(f"{type(self).__name__}: padding must be an int or a tuple of {sides} ints, got "
                                 f"{padding!r}")

    def forward(self, input: Any) -> Any:  # noqa: A002
        return pad(input, self.padding, self.mode)

    def extra_repr(self) -> str:
        return f"{self.padding}"


class _ConstantPadNd(_PadNd):
    mode = "constant"

    def __init__(self, padding: Any, value: float) -> None:
        super().__init__(padding)
        self.value = value

    def forward(self, input: Any) -> Any:  # noqa: A002
        return pad(input, self.padding, "constant", self.value)

    def extra_repr(self) -> str:
        return f"padding={self.padding}, value={self.value}"


class ConstantPad1d(_ConstantPadNd):
    """Pads the last dimension with ``value``."""

    dims = 1


class ConstantPad2d(_ConstantPadNd):
    """Pads the last two dimensions with ``value``."""

    dims = 2


class ConstantPad3d(_ConstantPadNd):
    """Pads the last three dimensions with ``value``."""

    dims = 3


class ZeroPad1d(ConstantPad1d):
    """Pads the last dimension with zeros."""

    def __init__(self, padding: Any) -> None:
        super().__init__(padding, 0.0)

    def extra_repr(self) -> str:
        return f"{self.padding}"


class ZeroPad2d(ConstantPad2d):
    """Pads the last two dimensions with zeros."""

    def __init__(self, padding: Any) -> None:
        super().__init__(padding, 0.0)

    def extra_repr(self) -> str:
        return f"{self.padding}"


class ZeroPad3d(ConstantPad3d):
    """Pads the last three dimensions with zeros."""

    def __init__(self, padding: Any) -> None:
        super().__init__(padding, 0.0)

    def extra_repr(self) -> str:
        return f"{self.padding}"


class ReflectionPad1d(_PadNd):
    """Pads the last dimension with its mirror image (the edge not repeated)."""

    mode, dims = "reflect", 1


class ReflectionPad2d(_PadNd):
    """Pads the last two dimensions with their mirror image (the edge not repeated)."""

    mode, dims = "reflect", 2


class ReflectionPad3d(_PadNd):
    """Pads the last three dimensions with their mirror image (the edge not repeated)."""

    mode, dims = "reflect", 3


class ReplicationPad1d(_PadNd):
    """Pads the last dimension by repeating its edge."""

    mode, dims = "replicate", 1


class ReplicationPad2d(_PadNd):
    """Pads the last two dimensions by repeating their edges."""

    mode, dims = "replicate", 2


class ReplicationPad3d(_PadNd):
    """Pads the last three dimensions by repeating their edges."""

    mode, dims = "replicate", 3


class CircularPad1d(_PadNd):
    """Pads the last dimension by wrapping around."""

    mode, dims = "circular", 1


class CircularPad2d(_PadNd):
    """Pads the last two dimensions by wrapping around."""

    mode, dims = "circular", 2


class CircularPad3d(_PadNd):
    """Pads the last three dimensions by wrapping around."""

    mode, dims = "circular", 3
