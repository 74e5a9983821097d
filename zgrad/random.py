"""The default random generator behind ``rand``/``randn`` and parameter initialization."""

from __future__ import annotations

import threading

import numpy as np

__all__ = ["manual_seed", "default_generator"]


class _GeneratorHolder:
    """Owns the process's default ``numpy.random.Generator``; created on first use."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._generator: np.random.Generator | None = None

    def get(self) -> np.random.Generator:
        with self._lock:
            if self._generator is None:
                self._generator = np.random.default_rng()
            return self._generator

    def seed(self, seed: int) -> None:
        with self._lock:
            self._generator = np.random.default_rng(seed)


_holder = _GeneratorHolder()


def default_generator() -> np.random.Generator:
    """The generator ``zgrad.rand``, ``zgrad.randn`` and ``nn`` initializers draw from."""
    return _holder.get()


def manual_seed(seed: int) -> None:
    """Seed the default generator so later random tensors are reproducible."""
    if not isinstance(seed, int) or isinstance(seed, bool):
        raise TypeError(f"manual_seed expects an int, got {type(seed).__name__}")
    _holder.seed(seed)
