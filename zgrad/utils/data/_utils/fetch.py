"""Fetchers: one batch (or one sample) from a dataset, for an index the sampler produced.

Shared by the main process (``num_workers=0``) and the workers.
"""

from __future__ import annotations

from typing import Any, Callable

from zgrad.utils.data.dataset import IterableDataset

__all__ = ["create_fetcher", "MapDatasetFetcher", "IterableDatasetFetcher"]


class MapDatasetFetcher:
    """``collate_fn([dataset[i] for i in index])`` (``dataset.__getitems__(index)`` where the
    dataset has it), or ``collate_fn(dataset[index])`` without auto-collation."""

    def __init__(self, dataset: Any, auto_collation: bool, collate_fn: Callable[[Any], Any], drop_last: bool) -> None:
        self.dataset = dataset
        self.auto_collation = auto_collation
        self.collate_fn = collate_fn
        getitems = getattr(dataset, "__getitems__", None)
        self._getitems = getitems if callable(getitems) else None

    def fetch(self, index: Any) -> Any:
        if not self.auto_collation:
            return self.collate_fn(self.dataset[index])
        if self._getitems is not None:
            return self.collate_fn(self._getitems(index))
        return self.collate_fn([self.dataset[i] for i in index])


class IterableDatasetFetcher:
    """The next ``len(index)`` samples of the dataset's iterator, collated (with auto-collation),
    or the next sample.

    ``fetch`` raises ``StopIteration`` once the iterator is exhausted, or when ``drop_last`` and
    fewer samples than asked for are left.
    """

    def __init__(self, dataset: Any, auto_collation: bool, collate_fn: Callable[[Any], Any], drop_last: bool) -> None:
        self.dataset_iter = iter(dataset)
        self.auto_collation = auto_collation
        self.collate_fn = collate_fn
        self.drop_last = drop_last
        self.ended = False

    def fetch(self, index: Any) -> Any:
        if self.ended:
            raise StopIteration
        if not self.auto_collation:
            return self.collate_fn(next(self.dataset_iter))
        data = []
        for _ in index:
            try:
                data.append(next(self.dataset_iter))
            except StopIteration:
                self.ended = True
                break
        if not data or (self.drop_last and len(data) < len(index)):
            raise StopIteration
        return self.collate_fn(data)


def create_fetcher(dataset: Any, auto_collation: bool, collate_fn: Callable[[Any], Any],
                   drop_last: bool) -> MapDatasetFetcher | IterableDatasetFetcher:
    """The fetcher for ``dataset``'s kind (an ``IterableDataset`` or a map-style one)."""
    kind = IterableDatasetFetcher if isinstance(dataset, IterableDataset) else MapDatasetFetcher
    return kind(dataset, auto_collation, collate_fn, drop_last)
