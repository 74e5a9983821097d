"""The named tuples that reductions return, as ``torch.return_types``: ``(values, indices)`` for
median, nanmedian, mode, cummax and cummin, ``(min, max)`` for aminmax, ``(hist, bin_edges)`` for
histogram, ``(mantissa, exponent)`` for frexp.

Each is a ``NamedTuple``: it unpacks like a tuple and names its fields (``.values``,
``.indices``).
"""

from __future__ import annotations

from typing import Any, NamedTuple

__all__ = ["median", "nanmedian", "mode", "cummax", "cummin", "aminmax", "histogram", "frexp", "svd", "qr",
           "triangular_solve"]


class median(NamedTuple):  # noqa: N801 - torch.return_types' names
    """What ``median(dim)`` returns: the medians and their int64 indices."""

    values: Any
    indices: Any


class nanmedian(NamedTuple):  # noqa: N801
    """What ``nanmedian(dim)`` returns: the medians of the non-NaN elements and their indices."""

    values: Any
    indices: Any


class mode(NamedTuple):  # noqa: N801
    """What ``mode`` returns: the most frequent values and the index of the last of each."""

    values: Any
    indices: Any


class cummax(NamedTuple):  # noqa: N801
    """What ``cummax`` returns: the running maxima and where each was taken from."""

    values: Any
    indices: Any


class cummin(NamedTuple):  # noqa: N801
    """What ``cummin`` returns: the running minima and where each was taken from."""

    values: Any
    indices: Any


class aminmax(NamedTuple):  # noqa: N801
    """What ``aminmax`` returns: the minima and the maxima."""

    min: Any
    max: Any


class histogram(NamedTuple):  # noqa: N801
    """What ``histogram`` returns: the count (or weight, or density) per bin and the bins' edges."""

    hist: Any
    bin_edges: Any


class svd(NamedTuple):  # noqa: N801
    """What the legacy ``zgrad.svd`` returns: input = U diag(S) V^T (V, not ``linalg.svd``'s Vh)."""

    U: Any
    S: Any
    V: Any


class frexp(NamedTuple):  # noqa: N801
    """What ``frexp`` returns: the mantissas and the int32 exponents."""

    mantissa: Any
    exponent: Any


class qr(NamedTuple):  # noqa: N801
    """What the legacy ``zgrad.qr`` returns: input = Q R."""

    Q: Any
    R: Any


class triangular_solve(NamedTuple):  # noqa: N801
    """What the legacy ``zgrad.triangular_solve`` returns: the solution and a copy of the matrix."""

    solution: Any
    cloned_coefficient: Any
