"""``DataLoader``: batches of a dataset, loaded in the main process or in worker processes, with
PyTorch's arguments, defaults, errors and semantics.

Multi-process loading (``num_workers > 0``; docs/data.md has the details): each worker is a
process of ``multiprocessing_context`` (default: the platform's start method, ``fork`` on Linux)
holding its own copy of the dataset; it builds the batches of the index batches it is sent and
hands them back through shared memory, with the structure as msgpack (no pickle). With
``spawn`` or ``forkserver`` the dataset, ``collate_fn`` and ``worker_init_fn`` reach the workers
through ``multiprocessing``'s own pickling, as in PyTorch (they are the program's own objects).
"""

from __future__ import annotations

import math
import os
import warnings
from typing import Any, Callable, Generic, Iterable, TypeVar

from zgrad.utils.data._utils.collate import default_collate, default_convert
from zgrad.utils.data._utils.loader_iter import BaseDataLoaderIter, _SingleProcessDataLoaderIter
from zgrad.utils.data._utils.worker_info import get_worker_info
from zgrad.utils.data.dataset import Dataset, IterableDataset
from zgrad.utils.data.sampler import BatchSampler, RandomSampler, Sampler, SequentialSampler

__all__ = ["DataLoader", "default_collate", "default_convert", "get_worker_info"]

T_co = TypeVar("T_co", covariant=True)

# Attributes that define the epochs a loader produces; PyTorch forbids changing them later.
_FROZEN_ATTRIBUTES = ("batch_size", "batch_sampler", "sampler", "drop_last", "dataset", "persistent_workers")


class _InfiniteConstantSampler(Sampler):
    """None forever: the index sampler of an ``IterableDataset``, which ignores indices."""

    def __iter__(self) -> Any:
        while True:
            yield None


class DataLoader(Generic[T_co]):
    """An iterable over batches of ``dataset``, as ``torch.utils.data.DataLoader``.

    Args:
        dataset: a map-style ``Dataset`` (``__getitem__``/``__len__``) or an ``IterableDataset``.
        batch_size: samples per batch; None turns batching off (each sample is converted with
            ``default_convert`` instead of collated).
        shuffle: reshuffle every epoch (a ``RandomSampler`` drawing from ``generator``).
        sampler: the keys to load, in order (any iterable; ``__len__`` for ``len(loader)``).
        batch_sampler: lists of keys, one per batch; excludes ``batch_size``, ``shuffle``,
            ``sampler`` and ``drop_last``.
        num_workers: worker processes; 0 loads in the calling thread.
        collate_fn: samples -> batch (default: ``default_collate``, or ``default_convert``
            without batching).
        pin_memory: copy batches into page-locked memory, where there is an accelerator (a
            warning and nothing else on a CPU-only machine, as in PyTorch).
        drop_last: drop the last, incomplete batch.
        timeout: seconds to wait for a batch from the workers (0: no limit; a dead worker is
            reported at once either way).
        worker_init_fn: called in each worker with its id, after seeding, before loading.
        multiprocessing_context: a start method name ("fork", "spawn", "forkserver") or a
            ``multiprocessing`` context.
        generator: a ``numpy.random.Generator`` for ``RandomSampler`` and the workers' base seed
            (default: zgrad's default generator, so ``zgrad.manual_seed`` makes loading
            reproducible).
        prefetch_factor: batches in flight per worker (default 2 with workers).
        persistent_workers: keep the workers (and their datasets) from one epoch to the next.

    Worker seeds are PyTorch's: each epoch draws ``base_seed`` from ``generator``; worker ``i``
    seeds Python's ``random`` and zgrad's generator with ``base_seed + i``, and numpy's global
    generator from a hash of both.

    Raises:
        ValueError: PyTorch's argument errors (``shuffle`` with a ``sampler``, ``batch_sampler``
            with ``batch_size``/``shuffle``/``sampler``/``drop_last``, ``prefetch_factor`` or
            ``persistent_workers`` without workers, a negative ``num_workers`` or ``timeout``,
            an unknown start method, a sampler or ``shuffle`` given with an ``IterableDataset``).
        TypeError: a ``multiprocessing_context`` that is neither a name nor a context.
    """

    dataset: Dataset
    batch_size: int | None
    num_workers: int
    pin_memory: bool
    drop_last: bool
    timeout: float
    sampler: Sampler | Iterable
    prefetch_factor: int | None
    __initialized = False

    def __init__(self, dataset: Dataset, batch_size: int | None = 1, shuffle: bool | None = None,
                 sampler: Sampler | Iterable | None = None, batch_sampler: Sampler | Iterable | None = None,
                 num_workers: int = 0, collate_fn: Callable[[list], Any] | None = None, pin_memory: bool = False,
                 drop_last: bool = False, timeout: float = 0, worker_init_fn: Callable[[int], None] | None = None,
                 multiprocessing_context: Any = None, generator: Any = None, *, prefetch_factor: int | None = None,
                 persistent_workers: bool = False) -> None:
        if num_workers < 0:
            raise ValueError("num_workers option should be non-negative; use num_workers=0 to disable multiprocessing.")
        if timeout < 0:
            raise ValueError("timeout option should be non-negative")
        if num_workers == 0 and prefetch_factor is not None:
            raise ValueError("prefetch_factor option could only be specified in multiprocessing.let num_workers > 0 "
                             "to enable multiprocessing, otherwise set prefetch_factor to None.")
        if num_workers > 0 and prefetch_factor is None:
            prefetch_factor = 2
        elif prefetch_factor is not None and prefetch_factor < 0:
            raise ValueError("prefetch_factor option should be non-negative")
        if persistent_workers and num_workers == 0:
            raise ValueError("persistent_workers option needs num_workers > 0")
        self.dataset = dataset
        self.num_workers = num_workers
        self.prefetch_factor = prefetch_factor
        self.pin_memory = pin_memory
        self.timeout = timeout
        self.worker_init_fn = worker_init_fn
        self.multiprocessing_context = multiprocessing_context

        if isinstance(dataset, IterableDataset):
            if shuffle not in {False, None}:
                raise ValueError(f"DataLoader with IterableDataset: expected unspecified shuffle option, but got "
                                 f"shuffle={shuffle}")
            if sampler is not None:
                raise ValueError(f"DataLoader with IterableDataset: expected unspecified sampler option, but got "
                                 f"sampler={sampler}")
            if batch_sampler is not None:
                raise ValueError(f"DataLoader with IterableDataset: expected unspecified batch_sampler option, but "
                                 f"got batch_sampler={batch_sampler}")
        else:
            shuffle = bool(shuffle)
        if sampler is not None and shuffle:
            raise ValueError("sampler option is mutually exclusive with shuffle")
        if batch_sampler is not None:
            if batch_size != 1 or shuffle or sampler is not None or drop_last:
                raise ValueError("batch_sampler option is mutually exclusive with batch_size, shuffle, sampler, and "
                                 "drop_last")
            batch_size = None
            drop_last = False
        elif batch_size is None and drop_last:
            raise ValueError("batch_size=None option disables auto-batching and is mutually exclusive with drop_last")

        if sampler is None:
            if isinstance(dataset, IterableDataset):
                sampler = _InfiniteConstantSampler()
            elif shuffle:
                sampler = RandomSampler(dataset, generator=generator)  # type: ignore[arg-type]
            else:
                sampler = SequentialSampler(dataset)  # type: ignore[arg-type]
        if batch_size is not None and batch_sampler is None:
            batch_sampler = BatchSampler(sampler, batch_size, drop_last)

        self.batch_size = batch_size
        self.drop_last = drop_last
        self.sampler = sampler
        self.batch_sampler = batch_sampler
        self.generator = generator
        if collate_fn is None:
            collate_fn = default_collate if self._auto_collation else default_convert
        self.collate_fn = collate_fn
        self.persistent_workers = persistent_workers
        self.__initialized = True
        self._IterableDataset_len_called: int | None = None
        self._iterator: Any = None  # the persistent workers' iterator
        self.check_worker_number_rationality()

    @property
    def multiprocessing_context(self) -> Any:
        return self.__multiprocessing_context

    @multiprocessing_context.setter
    def multiprocessing_context(self, context: Any) -> None:
        if context is not None:
            import multiprocessing.context  # on use, as the workers' machinery: importing zgrad stays light

            if self.num_workers <= 0:
                raise ValueError(f"multiprocessing_context can only be used with multi-process loading "
                                 f"(num_workers > 0), but got num_workers={self.num_workers}")
            if isinstance(context, str):
                methods = multiprocessing.get_all_start_methods()
                if context not in methods:
                    raise ValueError(f"multiprocessing_context option should specify a valid start method in "
                                     f"{methods!r}, but got multiprocessing_context={context!r}")
                context = multiprocessing.get_context(context)
            if not isinstance(context, multiprocessing.context.BaseContext):
                raise TypeError(f"multiprocessing_context option should be a valid context object or a string "
                                f"specifying the start method, but got multiprocessing_context={context}")
        self.__multiprocessing_context = context

    def __setattr__(self, attr: str, value: Any) -> None:
        if self.__initialized and attr in _FROZEN_ATTRIBUTES:
            raise ValueError(f"{attr} attribute should not be set after {type(self).__name__} is initialized")
        super().__setattr__(attr, value)

    @property
    def _auto_collation(self) -> bool:
        return self.batch_sampler is not None

    @property
    def _index_sampler(self) -> Any:
        """What the iterators draw from: the batch sampler when batching, else the sampler."""
        return self.batch_sampler if self._auto_collation else self.sampler

    def _get_iterator(self) -> BaseDataLoaderIter:
        if self.num_workers == 0:
            return _SingleProcessDataLoaderIter(self)
        self.check_worker_number_rationality()
        # Imported on first use (multiprocessing, sockets, shared memory): a third of importing
        # zgrad.utils.data otherwise, for programs that never start a worker.
        from zgrad.utils.data._utils.multiprocess_iter import _MultiProcessingDataLoaderIter

        return _MultiProcessingDataLoaderIter(self)

    def __iter__(self) -> BaseDataLoaderIter:
        """A new epoch's iterator; with ``persistent_workers``, the same one, reset (its workers
        and their dataset copies kept), unless its workers were stopped by a failure."""
        if not (self.persistent_workers and self.num_workers > 0):
            return self._get_iterator()
        if self._iterator is None or not self._iterator.workers_running:
            self._iterator = self._get_iterator()  # type: ignore[assignment]
        else:
            self._iterator._reset(self)
        return self._iterator  # type: ignore[return-value]

    def __len__(self) -> int:
        """Batches per epoch: the index sampler's length; for an ``IterableDataset``,
        ``len(dataset)`` over ``batch_size`` (rounded by ``drop_last``), a figure the loader then
        warns about if an epoch yields more."""
        if isinstance(self.dataset, IterableDataset):
            length = self._IterableDataset_len_called = len(self.dataset)  # type: ignore[arg-type]
            if self.batch_size is not None:
                length = length // self.batch_size if self.drop_last else math.ceil(length / self.batch_size)
            return length
        return len(self._index_sampler)

    def check_worker_number_rationality(self) -> None:
        """Warn, as PyTorch does, when ``num_workers`` exceeds the CPUs this process may use."""
        if not self.num_workers:
            return
        cpuset_checked = hasattr(os, "sched_getaffinity")
        suggested = len(os.sched_getaffinity(0)) if cpuset_checked else os.cpu_count()
        if suggested is not None and self.num_workers <= suggested:
            return
        if suggested is None:
            advice = "DataLoader is not able to compute a suggested max number of worker in current system."
        else:
            advice = (f"Our suggested max number of worker in current system is {suggested}"
                      f"{'' if cpuset_checked else ' (`cpuset` is not taken into account)'}, which is smaller than "
                      "what this DataLoader is going to create.")
        warnings.warn(f"This DataLoader will create {self.num_workers} worker processes in total. {advice} Please be "
                      "aware that excessive worker creation might get DataLoader running slow or even freeze, lower "
                      "the worker number to avoid potential slowness/freeze if necessary.", stacklevel=2)
