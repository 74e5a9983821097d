"""Random draws on the host from a numpy ``Generator``: the CPU backend's random ops, and what the
CUDA backend draws before copying up (so a seed gives the same numbers on both backends).

Each function fills host array ``out`` (any float dtype numpy can hold, any strides) and returns
it. numpy draws floats only in float32 and float64 (a half ``out`` arrives widened to float32, see
:mod:`zgrad.kernels.half_precision`): a strided ``out`` is drawn through a contiguous buffer.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from zgrad.errors import ZgradError

__all__ = ["random_uniform", "random_normal", "random_exponential", "random_integers", "multinomial"]

_DRAW_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))


def _fill_from(out: np.ndarray, draw: Callable[[np.ndarray], Any]) -> np.ndarray:
    """Fill ``out`` with ``draw(target)``, ``target`` a contiguous float32/float64 array: ``out``
    itself where it is one, else a buffer copied into ``out``."""
    if out.flags.c_contiguous and out.dtype in _DRAW_DTYPES:
        draw(out)
        return out
    target = np.empty(out.shape, out.dtype if out.dtype in _DRAW_DTYPES else np.float32)
    draw(target)
    np.copyto(out, target, casting="unsafe")
    return out


def random_uniform(generator: np.random.Generator, low: float, high: float, out: np.ndarray) -> np.ndarray:
    """out = U[low, high): ``low + (high - low) * U[0, 1)``."""
    def draw(target: np.ndarray) -> None:
        generator.random(out=target, dtype=target.dtype)
        target *= target.dtype.type(high - low)
        target += target.dtype.type(low)
    return _fill_from(out, draw)


def random_normal(generator: np.random.Generator, mean: float, std: float, out: np.ndarray) -> np.ndarray:
    """out = N(mean, std^2)."""
    def draw(target: np.ndarray) -> None:
        generator.standard_normal(out=target, dtype=target.dtype)
        target *= target.dtype.type(std)
        target += target.dtype.type(mean)
    return _fill_from(out, draw)


def random_exponential(generator: np.random.Generator, rate: float, out: np.ndarray) -> np.ndarray:
    """out = Exp(rate): density ``rate * exp(-rate * x)``."""
    def draw(target: np.ndarray) -> None:
        generator.standard_exponential(out=target, dtype=target.dtype)
        target /= target.dtype.type(rate)
    return _fill_from(out, draw)


def random_integers(generator: np.random.Generator, low: int, high: int, out: np.ndarray) -> np.ndarray:
    """out = integers uniform in [low, high), stored in ``out``'s dtype."""
    np.copyto(out, generator.integers(low, high, size=out.shape, dtype=np.int64), casting="unsafe")
    return out


def multinomial(generator: np.random.Generator, probs: np.ndarray, replacement: bool, out: np.ndarray) -> np.ndarray:
    """out[i, :] = ``out.shape[1]`` category indices drawn for row i of the 2-D weights ``probs``,
    with or without replacement.

    With replacement: inverse-CDF sampling (one uniform per draw, searched in the row's cumulative
    sums; the rows are searched at once by offsetting row i's sums by i). Without replacement: the
    exponential-race form of sequential sampling (keys ``probs / Exp(1)``, the largest win, in
    order), so every row is one partition and a sort of its winners.

    Raises:
        ZgradError: a negative, infinite or NaN weight, or a row that sums to 0 (PyTorch's messages).
    """
    rows, categories = probs.shape
    num_samples = out.shape[1]
    weights = probs.astype(np.float64)
    if not np.isfinite(weights).all() or (weights < 0).any():
        raise ZgradError("probability tensor contains either `inf`, `nan` or element < 0")
    if (weights.sum(axis=1) <= 0).any():
        raise ZgradError("invalid multinomial distribution (sum of probabilities <= 0)")
    if replacement:
        cdf = np.cumsum(weights, axis=1)
        cdf /= cdf[:, -1:]
        cdf[:, -1] = 1.0  # rounding must not let a draw fall past the last category
        offsets = np.arange(rows, dtype=np.float64)[:, None]
        draws = generator.random((rows, num_samples)) + offsets
        picks = np.searchsorted((cdf + offsets).reshape(-1), draws.reshape(-1), side="right")
        picks = picks.reshape(rows, num_samples) - np.arange(rows)[:, None] * categories
        # rounding in the offset sums can carry a draw just past its row's last category
        np.copyto(out, np.minimum(picks, categories - 1), casting="unsafe")
        return out
    keys = -(weights / generator.standard_exponential((rows, categories)))
    if num_samples < categories:  # the winners first (a partition), then their order
        winners = np.argpartition(keys, num_samples - 1, axis=1)[:, :num_samples]
        order = np.argsort(np.take_along_axis(keys, winners, axis=1), axis=1, kind="stable")
        np.copyto(out, np.take_along_axis(winners, order, axis=1), casting="unsafe")
    else:
        np.copyto(out, np.argsort(keys, axis=1, kind="stable"), casting="unsafe")
    return out
