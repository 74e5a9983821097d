"""How a tensor prints: ``zgrad.set_printoptions`` and the text of ``repr(tensor)``, laid out as
PyTorch lays it out (one width for every element, fixed or scientific notation chosen from the
magnitudes, long tensors summarized with ``...``, lines wrapped at ``linewidth``).

The options are process-wide, as PyTorch's are: every thread prints with the last ones set.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from zgrad.kernels.promotion import is_floating

__all__ = ["set_printoptions", "print_options", "tensor_body", "add_suffixes"]

# PyTorch's profiles: (precision, threshold, edgeitems, linewidth)
_PROFILES = {"default": (4, 1000, 3, 80), "short": (2, 1000, 2, 80), "full": (4, math.inf, 3, 80)}


@dataclass
class PrintOptions:
    """The options :func:`set_printoptions` sets (PyTorch's defaults)."""

    precision: int = 4
    threshold: float = 1000
    edgeitems: int = 3
    linewidth: int = 80
    sci_mode: bool | None = None


_OPTIONS = PrintOptions()


def print_options() -> PrintOptions:
    """The options tensors print with now."""
    return _OPTIONS


def set_printoptions(precision: int | None = None, threshold: float | None = None, edgeitems: int | None = None,
                     linewidth: int | None = None, profile: str | None = None, sci_mode: bool | None = None) -> None:
    """Set how tensors print, as ``torch.set_printoptions``; an option left None keeps its value.

    Args:
        precision: digits after the decimal point of floating elements (default 4).
        threshold: element count above which a tensor prints summarized (default 1000).
        edgeitems: elements printed at each end of a summarized dimension (default 3).
        linewidth: characters per line before wrapping (default 80).
        profile: "default", "short" or "full" (no summary): sets the four options above first.
        sci_mode: True or False forces scientific notation on or off; None lets the magnitudes
            decide (the default). Unlike the others, None here restores that default.
    """
    if profile in _PROFILES:
        _OPTIONS.precision, _OPTIONS.threshold, _OPTIONS.edgeitems, _OPTIONS.linewidth = _PROFILES[profile]
    if precision is not None:
        _OPTIONS.precision = precision
    if threshold is not None:
        _OPTIONS.threshold = threshold
    if edgeitems is not None:
        _OPTIONS.edgeitems = edgeitems
    if linewidth is not None:
        _OPTIONS.linewidth = linewidth
    _OPTIONS.sci_mode = sci_mode


class _Formatter:
    """One element's text at the common width of every element that prints; for floats the
    notation (whole numbers as ``1.``, fixed, or scientific) is chosen from the values."""

    def __init__(self, values: np.ndarray, floating: bool, options: PrintOptions) -> None:
        self.floating, self.precision = floating, options.precision
        self.int_mode, self.sci_mode, self.width = True, False, 1
        flat = values.reshape(-1)
        if not floating:
            self.width = max([self.width, *(len(str(v)) for v in flat.tolist())])
        else:
            finite = flat[np.isfinite(flat) & (flat != 0)]
            if finite.size:
                magnitudes = np.abs(finite)
                low, high = float(magnitudes.min()), float(magnitudes.max())
                self.int_mode = bool(np.all(finite == np.ceil(finite)))
                self.sci_mode = (high / low > 1000.0 or high > 1.0e8 or low < 1.0e-4 if options.sci_mode is None
                                 else options.sci_mode)
                if self.sci_mode:
                    texts = [f"{v:.{self.precision}e}" for v in finite.tolist()]
                elif self.int_mode:
                    texts = [f"{v:.0f}." for v in finite.tolist()]
                else:
                    texts = [f"{v:.{self.precision}f}" for v in finite.tolist()]
                self.width = max(self.width, *(len(t) for t in texts))

    def format(self, value: Any) -> str:
        if not self.floating:
            text = str(value)
        elif self.sci_mode:
            text = f"{value:{self.width}.{self.precision}e}"
        elif self.int_mode:
            text = f"{value:.0f}" + ("" if math.isinf(value) or math.isnan(value) else ".")
        else:
            text = f"{value:.{self.precision}f}"
        return " " * (self.width - len(text)) + text


def _summarized(values: np.ndarray, edgeitems: int) -> np.ndarray:
    """The elements a summarized print shows: the first and last ``edgeitems`` of every long
    dimension (none of a tensor of two or more dimensions when ``edgeitems`` is 0)."""
    if not edgeitems and values.ndim > 1:
        return values[(slice(0, 0),) * values.ndim]
    for axis, size in enumerate(values.shape):
        if size > 2 * edgeitems:
            keep = np.r_[0:edgeitems, size - edgeitems:size]
            values = np.take(values, keep, axis=axis)
    return values


def _items(values: np.ndarray, floating: bool) -> list:
    """The elements of 1-d ``values`` as Python numbers (floats of every floating dtype)."""
    return (values.astype(np.float64) if floating else values).tolist()


def _body(values: np.ndarray, indent: int, summarize: bool, formatter: _Formatter, options: PrintOptions) -> str:
    edge = options.edgeitems
    if values.ndim == 0:
        return formatter.format(_items(values.reshape(1), formatter.floating)[0])
    long = summarize and values.shape[0] > 2 * edge
    if values.ndim == 1:
        per_line = max(1, int(math.floor((options.linewidth - indent) / (formatter.width + 2))))
        if summarize and not edge:
            items = ["..."]
        elif long:
            items = [*map(formatter.format, _items(values[:edge], formatter.floating)), " ...",
                     *map(formatter.format, _items(values[-edge:], formatter.floating))]
        else:
            items = [formatter.format(v) for v in _items(values, formatter.floating)]
        lines = [", ".join(items[i:i + per_line]) for i in range(0, len(items), per_line)]
        return "[" + (",\n" + " " * (indent + 1)).join(lines) + "]"
    rows = [*range(edge), None, *range(values.shape[0] - edge, values.shape[0])] if long else range(values.shape[0])
    parts = ["..." if i is None else _body(values[i], indent + 1, summarize, formatter, options) for i in rows]
    return "[" + ("," + "\n" * (values.ndim - 1) + " " * (indent + 1)).join(parts) + "]"


def tensor_body(values: np.ndarray, indent: int) -> str:
    """The bracketed elements of host array ``values`` as PyTorch prints them after a prefix of
    ``indent`` characters (``"[]"`` for no elements). Only the elements that print are converted."""
    if values.size == 0:
        return "[]"
    options = _OPTIONS
    floating = is_floating(values.dtype)
    summarize = values.size > options.threshold
    shown = _summarized(values, options.edgeitems) if summarize else values
    formatter = _Formatter(shown.astype(np.float64) if floating else shown, floating, options)
    return _body(values, indent, summarize, formatter, options)


def add_suffixes(text: str, suffixes: list[str], indent: int) -> str:
    """``text`` (prefix and body) with ``", suffix"`` for each of ``suffixes`` and the closing
    parenthesis, starting a new line (indented by ``indent``) where one would pass the line width."""
    parts = [text]
    line_length = len(text) - text.rfind("\n") + 1
    for suffix in suffixes:
        if line_length + len(suffix) + 2 > _OPTIONS.linewidth:
            parts.append(",\n" + " " * indent + suffix)
            line_length = indent + len(suffix)
        else:
            parts.append(", " + suffix)
            line_length += len(suffix) + 2
    parts.append(")")
    return "".join(parts)
