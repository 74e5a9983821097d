"""Datasets, as PyTorch's: map-style (``Dataset``: ``__getitem__`` and ``__len__``) and
iterable-style (``IterableDataset``: ``__iter__``), and the ones that combine them.
"""

from __future__ import annotations

import bisect
import itertools
import math
import warnings
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, Generic, TypeVar

from zgrad.utils.data._random import numpy_generator

__all__ = ["Dataset", "IterableDataset", "TensorDataset", "ConcatDataset", "ChainDataset", "Subset", "random_split"]

T_co = TypeVar("T_co", covariant=True)


class Dataset(Generic[T_co]):
    """A map from keys to samples: subclasses implement ``__getitem__`` and usually ``__len__``
    (which samplers and ``len(loader)`` use), and may implement ``__getitems__(keys)`` to fetch a
    whole batch at once. ``a + b`` concatenates two datasets."""

    def __getitem__(self, index: Any) -> T_co:
        raise NotImplementedError("Subclasses of Dataset should implement __getitem__.")

    def __add__(self, other: Dataset[T_co]) -> ConcatDataset[T_co]:
        return ConcatDataset([self, other])


class IterableDataset(Dataset[T_co], Iterable[T_co]):
    """A stream of samples: subclasses implement ``__iter__``.

    With ``num_workers > 0`` every worker iterates its own copy of the dataset, so a dataset that
    should not repeat itself splits the work in ``__iter__`` (or in ``worker_init_fn``) by
    :func:`zgrad.utils.data.get_worker_info`'s ``id`` and ``num_workers``. ``a + b`` chains two.
    """

    def __iter__(self) -> Iterator[T_co]:
        raise NotImplementedError("Subclasses of IterableDataset should implement __iter__.")

    def __add__(self, other: Dataset[T_co]) -> ChainDataset:  # type: ignore[override]
        return ChainDataset([self, other])


class TensorDataset(Dataset[tuple]):
    """Sample ``i`` is ``tuple(t[i] for t in tensors)``.

    Raises:
        AssertionError: the tensors differ in their first dimension (PyTorch's error).
    """

    def __init__(self, *tensors: Any) -> None:
        if any(tensors[0].size(0) != tensor.size(0) for tensor in tensors):
            raise AssertionError("Size mismatch between tensors")
        self.tensors = tensors

    def __getitem__(self, index: Any) -> tuple:
        return tuple(tensor[index] for tensor in self.tensors)

    def __len__(self) -> int:
        return self.tensors[0].size(0)


class ConcatDataset(Dataset[T_co]):
    """Map-style ``datasets`` one after another; ``cumulative_sizes[i]`` is where dataset ``i`` ends.

    Raises:
        AssertionError: ``datasets`` is empty or holds an ``IterableDataset`` (PyTorch's errors).
        ValueError: (indexing) a negative index beyond the length.
    """

    def __init__(self, datasets: Iterable[Dataset]) -> None:
        self.datasets = list(datasets)
        if not self.datasets:
            raise AssertionError("datasets should not be an empty iterable")
        if any(isinstance(d, IterableDataset) for d in self.datasets):
            raise AssertionError("ConcatDataset does not support IterableDataset")
        self.cumulative_sizes = list(itertools.accumulate(len(d) for d in self.datasets))

    def __len__(self) -> int:
        return self.cumulative_sizes[-1]

    def __getitem__(self, idx: int) -> T_co:
        if idx < 0:
            if -idx > len(self):
                raise ValueError("absolute value of index should not exceed dataset length")
            idx += len(self)
        dataset_idx = bisect.bisect_right(self.cumulative_sizes, idx)
        start = self.cumulative_sizes[dataset_idx - 1] if dataset_idx else 0
        return self.datasets[dataset_idx][idx - start]


class ChainDataset(IterableDataset):
    """Iterable ``datasets`` one after another, chained as they are iterated.

    Raises:
        AssertionError: (iterating or ``len``) one of them is not an ``IterableDataset``.
    """

    def __init__(self, datasets: Iterable[Dataset]) -> None:
        self.datasets = datasets

    def _checked(self) -> Iterator[IterableDataset]:
        for d in self.datasets:
            if not isinstance(d, IterableDataset):
                raise AssertionError("ChainDataset only supports IterableDataset")
            yield d

    def __iter__(self) -> Iterator:
        for d in self._checked():
            yield from d

    def __len__(self) -> int:
        return sum(len(d) for d in self._checked())  # type: ignore[arg-type]


class Subset(Dataset[T_co]):
    """The samples of ``dataset`` at ``indices``, renumbered from 0.

    Raises:
        NotImplementedError: a subclass overrides ``__getitem__`` but not ``__getitems__``, which
            the DataLoader calls instead (PyTorch's rule).
    """

    def __init__(self, dataset: Dataset[T_co], indices: Sequence[int]) -> None:
        self.dataset = dataset
        self.indices = indices
        if type(self).__getitem__ is not Subset.__getitem__ and type(self).__getitems__ is Subset.__getitems__:
            raise NotImplementedError(
                f"{type(self).__name__} overrides __getitem__ but not __getitems__. When subclassing Subset and "
                "overriding __getitem__, you must also override __getitems__ to ensure DataLoader works correctly "
                "with your custom logic. A simple implementation:\n\n"
                "def __getitems__(self, indices):\n    return [self.__getitem__(idx) for idx in indices]")

    def __getitem__(self, idx: Any) -> T_co:
        if isinstance(idx, list):
            return self.dataset[[self.indices[i] for i in idx]]
        return self.dataset[self.indices[idx]]

    def __getitems__(self, indices: list[int]) -> list[T_co]:
        if callable(getattr(self.dataset, "__getitems__", None)):
            return self.dataset.__getitems__([self.indices[i] for i in indices])  # type: ignore[attr-defined]
        return [self.dataset[self.indices[i]] for i in indices]

    def __len__(self) -> int:
        return len(self.indices)


def _fraction_lengths(n: int, fractions: Sequence[float]) -> list[int]:
    """PyTorch's rounding of fractions to lengths: floor each, then hand the remainder out one at
    a time from the first split on."""
    lengths = []
    for i, frac in enumerate(fractions):
        if frac < 0 or frac > 1:
            raise ValueError(f"Fraction at index {i} is not between 0 and 1")
        lengths.append(math.floor(n * frac))
    for i in range(n - sum(lengths)):
        lengths[i % len(lengths)] += 1
    for i, length in enumerate(lengths):
        if length == 0:
            warnings.warn(f"Length of split at index {i} is 0. This might result in an empty dataset.", stacklevel=3)
    return lengths


def random_split(dataset: Dataset, lengths: Sequence[int | float], generator: Any = None) -> list[Subset]:
    """Split ``dataset`` into non-overlapping :class:`Subset`\\ s of random samples.

    Args:
        dataset: a map-style dataset with ``__len__``.
        lengths: the splits' lengths, or fractions summing to 1 (rounded as PyTorch rounds them:
            ``floor(f * len)`` each, the remainder spread one by one from the first split).
        generator: a ``numpy.random.Generator`` for the permutation; default: zgrad's default
            generator (seeded by ``zgrad.manual_seed``).

    Returns:
        One :class:`Subset` per length.

    Raises:
        ValueError: a fraction outside [0, 1], or lengths that do not add up to ``len(dataset)``.
    """
    if math.isclose(sum(lengths), 1) and sum(lengths) <= 1:
        lengths = _fraction_lengths(len(dataset), lengths)  # type: ignore[arg-type]
    if sum(lengths) != len(dataset):  # type: ignore[arg-type]
        raise ValueError("Sum of input lengths does not equal the length of the input dataset!")
    indices = numpy_generator(generator).permutation(sum(lengths)).tolist()  # type: ignore[arg-type]
    ends = itertools.accumulate(lengths)
    return [Subset(dataset, indices[end - length:end]) for end, length in zip(ends, lengths)]  # type: ignore[operator]
