"""The iterator a DataLoader returns for one epoch: the part every iterator shares, and the one
that loads in the main process (``num_workers=0``)."""

from __future__ import annotations

import warnings
from typing import Any

from zgrad.accelerator import is_available as accelerator_available
from zgrad.kernels.host_memory import tune_for_training
from zgrad.utils.data._random import draw_seed
from zgrad.utils.data._utils.fetch import create_fetcher
from zgrad.utils.data._utils.pin_memory import pin_memory
from zgrad.utils.data.dataset import IterableDataset

__all__ = ["BaseDataLoaderIter", "_SingleProcessDataLoaderIter"]


class BaseDataLoaderIter:
    """What every iterator of a loader shares: the index sampler, the collate function, the
    worker base seed and the ``IterableDataset`` length warning."""

    def __init__(self, loader: Any) -> None:
        self._dataset = loader.dataset
        self._iterable = isinstance(loader.dataset, IterableDataset)
        self._auto_collation = loader._auto_collation
        self._drop_last = loader.drop_last
        self._index_sampler = loader._index_sampler
        self._num_workers = loader.num_workers
        self._collate_fn = loader.collate_fn
        self._timeout = loader.timeout
        self._persistent_workers = loader.persistent_workers
        self._pin_memory = loader.pin_memory and accelerator_available()
        if loader.pin_memory and not self._pin_memory:
            warnings.warn("'pin_memory' argument is set as true but no accelerator is found, then device pinned "
                          "memory won't be used.", stacklevel=5)  # the loop that iterates the loader
        self._base_seed = draw_seed(loader.generator)
        tune_for_training()  # the batches it collates are fresh memory every step, freed the next
        BaseDataLoaderIter._reset(self, loader)

    def _reset(self, loader: Any) -> None:
        self._sampler_iter = iter(self._index_sampler)
        self._num_yielded = 0
        self._length_reported = loader._IterableDataset_len_called

    def __iter__(self) -> BaseDataLoaderIter:
        return self

    def _next_index(self) -> Any:
        return next(self._sampler_iter)  # StopIteration ends the epoch

    def _next_data(self) -> Any:
        raise NotImplementedError

    def _finish(self, data: Any) -> Any:
        """A batch as the loader hands it out: pinned when ``pin_memory`` is in effect."""
        return pin_memory(data) if self._pin_memory else data

    def __next__(self) -> Any:
        data = self._next_data()
        self._num_yielded += 1
        if self._iterable and self._length_reported is not None and self._num_yielded > self._length_reported:
            message = (f"Length of IterableDataset {self._dataset} was reported to be {self._length_reported}"
                       f"(when accessing len(dataloader)), but {self._num_yielded} samples have been fetched. ")
            if self._num_workers > 0:
                message += ("For multiprocessing data-loading, this could be caused by not properly configuring the "
                            "IterableDataset replica at each worker. Please see "
                            "https://pytorch.org/docs/stable/data.html#torch.utils.data.IterableDataset for examples.")
            warnings.warn(message, stacklevel=2)
        return data

    def __len__(self) -> int:
        return len(self._index_sampler)

    def __getstate__(self) -> Any:
        raise NotImplementedError(f"{type(self).__name__} cannot be pickled")


class _SingleProcessDataLoaderIter(BaseDataLoaderIter):
    """Loads every batch in the calling thread."""

    def __init__(self, loader: Any) -> None:
        super().__init__(loader)
        self._fetcher = create_fetcher(self._dataset, self._auto_collation, self._collate_fn, self._drop_last)

    def _next_data(self) -> Any:
        return self._finish(self._fetcher.fetch(self._next_index()))
