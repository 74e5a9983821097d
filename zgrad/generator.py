"""``zgrad.Generator``: a seedable source of random numbers, as ``torch.Generator``.

A generator owns a numpy ``PCG64`` bit generator; every random function of zgrad takes one as
``generator=`` (None: the default generator of the tensor's device, in :mod:`zgrad.random`).
Draws for CUDA tensors are made on the host and copied to the device, so a generator of either
device gives the same numbers for the same seed. The streams differ from PyTorch's (its CPU generator is a Mersenne Twister):
seeding makes a zgrad program reproducible, not equal to the PyTorch one.

Thread-safety: draws are serialized by numpy's bit-generator lock; seeding and state changes
by the generator's own lock.
"""

from __future__ import annotations

import os
import threading
from typing import Any

import numpy as np

from zgrad.device import Device, as_device
from zgrad.errors import ZgradError
from zgrad.tensor import Tensor

__all__ = ["Generator", "DEFAULT_SEED", "check_seed"]

DEFAULT_SEED = 67280421310721
"""The seed of a new :class:`Generator`, as PyTorch's."""

_SEED_MODULUS = 2**64
_FIELD_BYTES = (8, 16, 16, 8, 8)  # seed, PCG64 state, PCG64 increment, has_uint32, uinteger
STATE_BYTES = sum(_FIELD_BYTES)


def check_seed(seed: Any, what: str) -> int:
    """``seed`` as the unsigned 64-bit integer PyTorch keeps (negative seeds wrap, as there).

    Raises:
        TypeError: ``seed`` is not an int.
        ValueError: ``seed`` is outside [-2**63, 2**64).
    """
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise TypeError(f"{what} expects an int, got {type(seed).__name__}")
    seed = int(seed)
    if not -(2**63) <= seed < _SEED_MODULUS:
        raise ValueError(f"Overflow when unpacking long: {what} expects a seed in [-2**63, 2**64), got {seed}")
    return seed % _SEED_MODULUS


class Generator:
    """A pseudo-random number generator (PCG64) for ``device`` ("cpu" or "cuda").

    Example::

        g = zgrad.Generator().manual_seed(42)
        a = zgrad.rand(3, generator=g)

    Raises:
        ValueError: an unknown device string.
    """

    def __init__(self, device: "str | Device" = "cpu") -> None:
        self._device = as_device(device)
        self._lock = threading.Lock()
        self._seed = DEFAULT_SEED
        self._numpy = np.random.default_rng(DEFAULT_SEED)

    @property
    def device(self) -> Device:
        """The device whose tensors this generator fills."""
        return self._device

    def manual_seed(self, seed: int) -> "Generator":
        """Restart the stream from ``seed`` and return this generator.

        Raises:
            TypeError: ``seed`` is not an int.
            ValueError: ``seed`` is outside [-2**63, 2**64).
        """
        seed = check_seed(seed, "manual_seed")
        with self._lock:
            self._seed = seed
            self._numpy = np.random.default_rng(seed)
        return self

    def seed(self) -> int:
        """Restart the stream from a non-deterministic seed (from the OS) and return that seed."""
        seed = int.from_bytes(os.urandom(8), "little")
        self.manual_seed(seed)
        return seed

    def initial_seed(self) -> int:
        """The seed the current stream started from."""
        return self._seed

    def get_state(self) -> Tensor:
        """The generator's state as a uint8 tensor, for :meth:`set_state`."""
        with self._lock:
            state = self._numpy.bit_generator.state
            fields = (self._seed, state["state"]["state"], state["state"]["inc"], state["has_uint32"],
                      state["uinteger"])
        raw = b"".join(int(v).to_bytes(n, "little") for v, n in zip(fields, _FIELD_BYTES))
        return Tensor(np.frombuffer(raw, dtype=np.uint8).copy())

    def set_state(self, new_state: Any) -> "Generator":
        """Restore a state taken by :meth:`get_state` (of any generator) and return this generator.

        Raises:
            TypeError: ``new_state`` is not a uint8 tensor.
            ZgradError: ``new_state`` has the wrong size (not a state of a zgrad generator).
        """
        if not isinstance(new_state, Tensor) or new_state.dtype != np.uint8:
            raise TypeError(f"expected a zgrad.ByteTensor (a uint8 tensor from get_state()), got "
                            f"{getattr(new_state, 'dtype', type(new_state).__name__)}")
        raw = new_state._host().tobytes()
        if len(raw) != STATE_BYTES:
            raise ZgradError(f"Expected a state of {STATE_BYTES} bytes (from Generator.get_state()), got {len(raw)}")
        offsets = np.cumsum((0, *_FIELD_BYTES))
        seed, pcg_state, pcg_inc, has_uint32, uinteger = (
            int.from_bytes(raw[a:b], "little") for a, b in zip(offsets[:-1], offsets[1:]))
        numpy = np.random.Generator(np.random.PCG64())
        numpy.bit_generator.state = {"bit_generator": "PCG64", "state": {"state": pcg_state, "inc": pcg_inc},
                                     "has_uint32": has_uint32, "uinteger": uinteger}
        with self._lock:
            self._seed, self._numpy = seed, numpy
        return self

    def numpy(self) -> np.random.Generator:
        """The numpy generator the draws come from (shared, not a copy)."""
        return self._numpy

    def __repr__(self) -> str:
        return f"<zgrad.Generator object at {id(self):#x} (device={self._device})>"
