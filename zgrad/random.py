"""``zgrad.random``: the default generators and the functions that seed them, as ``torch.random``.

The default generator serves every random function given no ``generator=`` (``rand``,
``randint``, ``nn.init``, dropout, samplers) for CPU tensors; CUDA tensors have their own
(``zgrad.cuda.manual_seed`` and friends), as in PyTorch. Both start from a non-deterministic
seed, as PyTorch's do; ``manual_seed`` seeds both and makes a program reproducible. Seeded
alike, the two give the same numbers (CUDA draws are made on the host).
"""

from __future__ import annotations

import contextlib
import os
from typing import Any, Iterator

import numpy as np

from zgrad.errors import ZgradError
from zgrad.generator import Generator
from zgrad.tensor import Tensor

__all__ = ["cuda_default_generator", "default_generator", "fork_rng", "get_rng_state", "initial_seed", "manual_seed", "numpy_generator",
           "seed", "set_rng_state"]

default_generator = Generator()
"""The generator random functions use for CPU tensors when given none."""
cuda_default_generator = Generator("cuda")
"""The generator random functions use for CUDA tensors when given none (``zgrad.cuda``'s)."""
for _generator in (default_generator, cuda_default_generator):  # one non-deterministic start for both
    _generator.manual_seed(int.from_bytes(os.urandom(8), "little"))


def manual_seed(seed: int) -> Generator:
    """Seed the default generators (CPU and CUDA) so later random tensors are reproducible;
    returns the CPU one.

    Raises:
        TypeError: ``seed`` is not an int.
        ValueError: ``seed`` is outside [-2**63, 2**64).
    """
    cuda_default_generator.manual_seed(seed)
    return default_generator.manual_seed(seed)


def seed() -> int:
    """Seed the default generators from the OS (non-deterministic) and return the seed."""
    seed = default_generator.seed()
    cuda_default_generator.manual_seed(seed)
    return seed


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
    """Restore the default generators' states (CPU and CUDA) at the end of the block, so draws
    inside it leave the streams outside unchanged (``enabled=False``: do nothing). ``devices`` is
    accepted for PyTorch's signature (zgrad has one CUDA default generator).

    Example::

        with zgrad.random.fork_rng():
            zgrad.manual_seed(0)
            noise = zgrad.randn(3)   # the caller's stream continues as if this never ran
    """
    if not enabled:
        yield
        return
    states = [(g, g.get_state()) for g in (default_generator, cuda_default_generator)]
    try:
        yield
    finally:
        for generator, state in states:
            generator.set_state(state)


def numpy_generator(generator: Generator | None = None, device: Any = None) -> np.random.Generator:
    """The numpy generator a random function draws from: ``generator``'s, or the default one's
    for ``device``.

    Args:
        generator: a :class:`zgrad.Generator`, or None for the default generator of ``device``.
        device: the device (or device type) of the tensor being filled (None: the CPU); an
            explicit generator must match its type.

    Raises:
        TypeError: ``generator`` is not a ``zgrad.Generator``.
        ZgradError: ``generator`` is for another device type than ``device``.
    """
    if generator is None:
        return (cuda_default_generator if getattr(device, "type", device) == "cuda" else default_generator).numpy()
    if not isinstance(generator, Generator):
        raise TypeError(f"generator must be a zgrad.Generator or None, got {type(generator).__name__}")
    device_type = getattr(device, "type", device)
    if device_type is not None and generator.device.type != device_type:
        raise ZgradError(f"Expected a '{device_type}' device type for generator but found '{generator.device.type}'")
    return generator.numpy()
