"""Samplers: the order in which a DataLoader visits a map-style dataset, as PyTorch's.

A sampler yields dataset keys (``SequentialSampler``, ``RandomSampler``, ...) or lists of them
(``BatchSampler``). Random ones draw from their ``generator`` (a ``numpy.random.Generator``, see
:mod:`zgrad.utils.data._random`) or, without one, from zgrad's default generator, so
``zgrad.manual_seed`` makes them reproducible.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator, Sequence, Sized
from typing import Any, Generic, TypeVar

import numpy as np

from zgrad.errors import ZgradError
from zgrad.utils.data._random import draw_seed, numpy_generator, seeded_generator

__all__ = ["Sampler", "SequentialSampler", "RandomSampler", "SubsetRandomSampler", "WeightedRandomSampler",
           "BatchSampler"]

T_co = TypeVar("T_co", covariant=True)

# RandomSampler with replacement draws this many indices at a time, as PyTorch's does.
_REPLACEMENT_CHUNK = 32


def _is_positive_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


class Sampler(Generic[T_co]):
    """Base class of samplers: subclasses implement ``__iter__`` and, for ``len(loader)``, ``__len__``."""

    def __iter__(self) -> Iterator[T_co]:
        raise NotImplementedError


class SequentialSampler(Sampler[int]):
    """``0, 1, ..., len(data_source) - 1``, in that order, every time."""

    def __init__(self, data_source: Sized) -> None:
        self.data_source = data_source

    def __iter__(self) -> Iterator[int]:
        return iter(range(len(self.data_source)))

    def __len__(self) -> int:
        return len(self.data_source)


class RandomSampler(Sampler[int]):
    """A shuffled ``range(len(data_source))``, or ``num_samples`` indices drawn with replacement.

    Without replacement, ``num_samples`` larger than the dataset yields whole permutations, then
    the start of one more. Without a ``generator``, each iteration seeds a fresh generator from
    zgrad's default one (as PyTorch seeds a fresh ``torch.Generator``).

    Raises:
        TypeError: ``replacement`` is not a bool.
        ValueError: ``num_samples`` (default: the dataset's length) is not a positive int.
    """

    def __init__(self, data_source: Sized, replacement: bool = False, num_samples: int | None = None,
                 generator: Any = None) -> None:
        self.data_source = data_source
        self.replacement = replacement
        self._num_samples = num_samples
        self.generator = generator
        if not isinstance(self.replacement, bool):
            raise TypeError(f"replacement should be a boolean value, but got replacement={self.replacement}")
        if not isinstance(self.num_samples, int) or self.num_samples <= 0:
            raise ValueError(f"num_samples should be a positive integer value, but got num_samples={self.num_samples}")

    @property
    def num_samples(self) -> int:
        return len(self.data_source) if self._num_samples is None else self._num_samples

    def __iter__(self) -> Iterator[int]:
        n = len(self.data_source)
        rng = seeded_generator(draw_seed(None)) if self.generator is None else numpy_generator(self.generator)
        if self.replacement:
            for _ in range(self.num_samples // _REPLACEMENT_CHUNK):
                yield from rng.integers(0, n, size=_REPLACEMENT_CHUNK).tolist()
            yield from rng.integers(0, n, size=self.num_samples % _REPLACEMENT_CHUNK).tolist()
        else:
            for _ in range(self.num_samples // n):
                yield from rng.permutation(n).tolist()
            yield from rng.permutation(n).tolist()[: self.num_samples % n]

    def __len__(self) -> int:
        return self.num_samples


class SubsetRandomSampler(Sampler[int]):
    """The given ``indices`` in a random order (a new one each iteration)."""

    def __init__(self, indices: Sequence[int], generator: Any = None) -> None:
        self.indices = indices
        self.generator = generator

    def __iter__(self) -> Iterator[int]:
        for i in numpy_generator(self.generator).permutation(len(self.indices)).tolist():
            yield self.indices[i]

    def __len__(self) -> int:
        return len(self.indices)


class WeightedRandomSampler(Sampler[int]):
    """``num_samples`` indices of ``range(len(weights))``, drawn with probabilities proportional to
    ``weights``; without replacement each index is drawn at most once (zero-weight ones last, as
    PyTorch's ``multinomial`` does).

    Raises:
        ValueError: ``num_samples`` is not a positive int, ``replacement`` not a bool, or
            ``weights`` not one-dimensional.
        ZgradError: (when iterated) a weight is negative, infinite or NaN, they sum to 0, or more
            samples than weights are asked for without replacement.
    """

    def __init__(self, weights: Sequence[float], num_samples: int, replacement: bool = True,
                 generator: Any = None) -> None:
        if not _is_positive_int(num_samples):
            raise ValueError(f"num_samples should be a positive integer value, but got num_samples={num_samples}")
        if not isinstance(replacement, bool):
            raise ValueError(f"replacement should be a boolean value, but got replacement={replacement}")
        array = np.asarray(weights, dtype=np.float64)  # a list, an array or a tensor
        if array.ndim != 1:
            raise ValueError(f"weights should be a 1d sequence but given weights have shape {tuple(array.shape)}")
        self.weights = array
        self.num_samples = num_samples
        self.replacement = replacement
        self.generator = generator

    def _probabilities(self) -> np.ndarray:
        """The weights normalized, checked as ``torch.multinomial`` checks them (its messages
        differ between its path for one draw or none replaced and its path for the others)."""
        w = self.weights
        if not self.replacement and self.num_samples > w.size:
            raise ZgradError("cannot sample n_sample > prob_dist.size(-1) samples without replacement")
        if not np.all(w >= 0) or np.any(np.isinf(w)):
            if not self.replacement or self.num_samples == 1:
                raise ZgradError("probability tensor contains either `inf`, `nan` or element < 0")
            if np.any(np.isinf(w)):
                raise ZgradError("invalid multinomial distribution (encountering probability entry = infinity or NaN)")
            raise ZgradError("invalid multinomial distribution (encountering probability entry < 0)")
        if w.sum() <= 0:
            raise ZgradError("invalid multinomial distribution (sum of probabilities <= 0)")
        return w / w.sum()

    def __iter__(self) -> Iterator[int]:
        p = self._probabilities()
        rng = numpy_generator(self.generator)
        if self.replacement:
            drawn = rng.choice(p.size, size=self.num_samples, replace=True, p=p)
        else:
            # Exponential races (the Efraimidis-Spirakis scheme): the smallest E_i / p_i win, which
            # is sampling without replacement by weight; zero weights race at infinity, so last.
            with np.errstate(divide="ignore"):
                keys = rng.exponential(size=p.size) / p
            drawn = np.argsort(keys, kind="stable")[: self.num_samples]
        yield from drawn.tolist()

    def __len__(self) -> int:
        return self.num_samples


class BatchSampler(Sampler[list]):
    """Lists of ``batch_size`` keys from ``sampler`` (any iterable); the last one shorter unless
    ``drop_last``.

    Raises:
        ValueError: ``batch_size`` is not a positive int, or ``drop_last`` not a bool.
    """

    def __init__(self, sampler: Sampler[int] | Iterable[int], batch_size: int, drop_last: bool) -> None:
        if not _is_positive_int(batch_size):
            raise ValueError(f"batch_size should be a positive integer value, but got batch_size={batch_size}")
        if not isinstance(drop_last, bool):
            raise ValueError(f"drop_last should be a boolean value, but got drop_last={drop_last}")
        self.sampler = sampler
        self.batch_size = batch_size
        self.drop_last = drop_last

    def __iter__(self) -> Iterator[list]:
        keys = iter(self.sampler)
        if self.drop_last:
            yield from (list(batch) for batch in zip(*[keys] * self.batch_size))
            return
        batch = list(itertools.islice(keys, self.batch_size))
        while batch:
            yield batch
            batch = list(itertools.islice(keys, self.batch_size))

    def __len__(self) -> int:
        if self.drop_last:
            return len(self.sampler) // self.batch_size  # type: ignore[arg-type]
        return (len(self.sampler) + self.batch_size - 1) // self.batch_size  # type: ignore[arg-type]
