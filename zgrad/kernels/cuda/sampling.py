"""The CUDA backend's random ops: drawn on the host by :mod:`zgrad.kernels.sampling` from the numpy
Generator the caller passes, then copied into ``out`` (so a seed gives the same numbers on both
backends).

Part of :mod:`zgrad.kernels.cuda.backend` (which re-exports these); each writes into ``out`` and returns it.
"""

from __future__ import annotations

import numpy as np

from zgrad.kernels import sampling
from zgrad.kernels.cuda.array import DeviceArray
from zgrad.kernels.cuda.pointwise import copy
from zgrad.kernels.cuda.elementwise import upload

__all__ = ["random_uniform", "random_normal", "random_exponential", "random_integers", "multinomial"]


def _host_like(out: DeviceArray) -> np.ndarray:
    return np.empty(out.shape, out.dtype)


def _fill_from_host(out: DeviceArray, values: np.ndarray) -> DeviceArray:
    return copy(upload(values), out)


def random_uniform(generator: np.random.Generator, low: float, high: float, out: DeviceArray) -> DeviceArray:
    return _fill_from_host(out, sampling.random_uniform(generator, low, high, _host_like(out)))


def random_normal(generator: np.random.Generator, mean: float, std: float, out: DeviceArray) -> DeviceArray:
    return _fill_from_host(out, sampling.random_normal(generator, mean, std, _host_like(out)))


def random_exponential(generator: np.random.Generator, rate: float, out: DeviceArray) -> DeviceArray:
    return _fill_from_host(out, sampling.random_exponential(generator, rate, _host_like(out)))


def random_integers(generator: np.random.Generator, low: int, high: int, out: DeviceArray) -> DeviceArray:
    return _fill_from_host(out, sampling.random_integers(generator, low, high, _host_like(out)))


def multinomial(generator: np.random.Generator, probs: DeviceArray, replacement: bool, out: DeviceArray) -> DeviceArray:
    return _fill_from_host(out, sampling.multinomial(generator, probs.to_host(), replacement, _host_like(out)))
