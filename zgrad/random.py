"""``zgrad.random``: the default generator and the functions that seed it, as ``torch.random``.

The default generator serves every random function given no ``generator=`` (``rand``,
``randint``, ``nn.init``, dropout, samplers), on the CPU and on CUDA alike. It starts from a
non-deterministic seed, as PyTorch's does; ``manual_seed`` makes a program reproducible.
"""

from __future__ import annotations

import contextlib
import os
from typing import Any, Iterator

import numpy as np

from zgrad.errors import ZgradError
from zgrad.generator import Generator
from zgrad.tensor import Tensor

__all__ = ["default_generator", "fork_rng", "get_rng_state", "initial_seed", "manual_seed", "numpy_generator",
           "seed", "set_rng_state"]

default_generator = Generator()
"""The generator random functions use when given none."""
default_generator.manual_seed(int.from_bytes(os.urandom(8), "little"))


def manual_seed(seed: int) -> Generator:
    """Seed the default generator so later random tensors are reproducible; returns it.

    Raises:
        TypeError: ``seed`` is not an int.
        ValueError: ``seed`` is outside [-2**63, 2**64).
    """
    return default_generator.manual_seed(seed)


def seed() -> int:
    """Seed the default generator from the OS (non-deterministic) and return the seed."""
    return default_generator.seed()


def initial_seed() -> int:
    """The seed the default generator's stream started from."""
    return default_generator.initial_seed()


def get_rng_state() -> Tensor:
    """The default generator's state as a uint8 tensor (see :func:`set_rng_state`)."""
    return default_generator.get_state()


def set_rng_state(new_state: Tensor) -> None:
    """Restore the default generator's state from :func:`get_rng_state`.

    Raises:
        TypeError: ``new_state`` is not a uint8 tensor.
        ZgradError: it is not a state a zgrad generator gave.
    """
    default_generator.set_state(new_state)


@contextlib.contextmanager
def fork_rng(devices: Any = None, enabled: bool = True, **_: Any) -> Iterator[None]:
    """Restore the default generator's state at the end of the block, so draws inside it leave
    the stream outside unchanged (``enabled=False``: do nothing). ``devices`` is accepted for
    PyTorch's signature: one default generator serves every device here.

    Example::

        with zgrad.random.fork_rng():
            zgrad.manual_seed(0)
            noise = zgrad.randn(3)   # the caller's stream continues as if this never ran
    """
    if not enabled:
        yield
        return
    state = get_rng_state()
    try:
        yield
    finally:
        set_rng_state(state)


def numpy_generator(generator: Generator | None = None, device: Any = None) -> np.random.Generator:
    """The numpy generator a random function draws from: ``generator``'s, or the default one's.

    Args:
        generator: a :class:`zgrad.Generator`, or None for the default generator.
        device: the device of the tensor being filled; an explicit generator must match its type
            (the default generator serves every device).

    Raises:
        TypeError: ``generator`` is not a ``zgrad.Generator``.
        ZgradError: ``generator`` is for another device type than ``device``.
    """
    if generator is None:
        return default_generator.numpy()
    if not isinstance(generator, Generator):
        raise TypeError(f"generator must be a zgrad.Generator or None, got {type(generator).__name__}")
    device_type = getattr(device, "type", device)
    if device_type is not None and generator.device.type != device_type:
        raise ZgradError(f"Expected a '{device_type}' device type for generator but found '{generator.device.type}'")
    return generator.numpy()
