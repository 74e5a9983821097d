"""Where the samplers, ``random_split`` and the DataLoader draw their random numbers.

A ``generator=`` argument is a ``zgrad.Generator``, a ``numpy.random.Generator``, or any object
with the methods of one that are used here (``integers``, ``permutation``, ``choice``). None means
zgrad's default generator, the one ``zgrad.manual_seed`` seeds, so a seeded program loads its data
in the same order on every run.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from zgrad import random as zgrad_random
from zgrad.generator import Generator

__all__ = ["numpy_generator", "draw_seed", "seeded_generator"]

# Seeds are drawn as PyTorch draws them (``random_()`` of an int64): uniform in [0, 2**63).
_SEED_BOUND = 2**63
# What numpy's seeding takes; PyTorch also takes negative seeds, and wraps them the same way.
_SEED_MODULUS = 2**64
_GENERATOR_METHODS = ("integers", "permutation", "choice")


def numpy_generator(generator: Any) -> np.random.Generator:
    """The generator to draw from: ``generator`` itself, the numpy generator of a
    ``zgrad.Generator``, or zgrad's default one for None.

    Raises:
        TypeError: ``generator`` is neither None nor generator-like.
    """
    if generator is None or isinstance(generator, Generator):
        return zgrad_random.numpy_generator(generator)
    if isinstance(generator, np.random.Generator) or all(hasattr(generator, m) for m in _GENERATOR_METHODS):
        return generator
    raise TypeError(f"generator must be None, a numpy.random.Generator, a zgrad.Generator or an object with its "
                    f"{', '.join(_GENERATOR_METHODS)} methods; got {type(generator).__name__}")


def draw_seed(generator: Any) -> int:
    """A seed drawn from ``generator`` (see :func:`numpy_generator`), in [0, 2**63)."""
    return int(numpy_generator(generator).integers(0, _SEED_BOUND))


def seeded_generator(seed: int) -> np.random.Generator:
    """A fresh generator whose draws depend only on ``seed`` (any int; negative ones wrap)."""
    return np.random.default_rng(int(seed) % _SEED_MODULUS)
