"""DataLoader in the main process (num_workers=0): batches, lengths, samplers, reproducibility,
iterable datasets, and PyTorch's argument errors and warnings, compared with torch's."""

from __future__ import annotations

import re
import warnings

import numpy as np
import pytest

import zgrad
from helpers import require_torch
from zgrad.utils.data import (
    BatchSampler, DataLoader, Dataset, IterableDataset, SequentialSampler, TensorDataset, get_worker_info,
)


class Squares(Dataset):
    def __init__(self, n=10):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        return {"x": float(i), "y": i * i}


class Counting(IterableDataset):
    def __init__(self, n, reported=None):
        self.n, self.reported = n, reported

    def __iter__(self):
        return iter(range(self.n))

    def __len__(self):
        return self.n if self.reported is None else self.reported


ARGUMENT_ERRORS = [
    dict(num_workers=-1), dict(timeout=-1), dict(prefetch_factor=2), dict(num_workers=1, prefetch_factor=-1),
    dict(persistent_workers=True), dict(shuffle=True, sampler=[1]), dict(batch_sampler=[[1]], batch_size=2),
    dict(batch_sampler=[[1]], shuffle=True), dict(batch_sampler=[[1]], sampler=[1]),
    dict(batch_sampler=[[1]], drop_last=True), dict(batch_size=None, drop_last=True),
    dict(multiprocessing_context="fork"), dict(num_workers=1, multiprocessing_context="nope"),
    dict(num_workers=1, multiprocessing_context=3),
]
ITERABLE_ERRORS = [dict(shuffle=True), dict(sampler=[1]), dict(batch_sampler=[[1]])]


@pytest.mark.torch
@pytest.mark.parametrize("kwargs", ARGUMENT_ERRORS, ids=repr)
def test_argument_errors_match_torch(kwargs):
    torch = require_torch()
    with pytest.raises(Exception) as theirs:
        torch.utils.data.DataLoader(range(10), **kwargs)
    with pytest.raises(type(theirs.value), match="^" + re.escape(str(theirs.value)) + "$"):
        DataLoader(range(10), **kwargs)


@pytest.mark.torch
@pytest.mark.parametrize("kwargs", ITERABLE_ERRORS, ids=repr)
def test_iterable_dataset_argument_errors_match_torch(kwargs):
    torch = require_torch()

    class TorchCounting(torch.utils.data.IterableDataset):
        def __iter__(self):
            return iter(range(3))

    with pytest.raises(Exception) as theirs:
        torch.utils.data.DataLoader(TorchCounting(), **kwargs)
    with pytest.raises(type(theirs.value), match="^" + re.escape(str(theirs.value)) + "$"):
        DataLoader(Counting(3), **kwargs)


def test_attributes_and_frozen_ones():
    loader = DataLoader(range(10), batch_size=3, drop_last=True)
    assert (loader.batch_size, loader.drop_last, loader.num_workers, loader.prefetch_factor) == (3, True, 0, None)
    assert isinstance(loader.sampler, SequentialSampler) and isinstance(loader.batch_sampler, BatchSampler)
    assert loader.dataset == range(10) and loader.collate_fn is zgrad.utils.data.default_collate
    assert DataLoader(range(3), num_workers=2).prefetch_factor == 2
    for name in ("batch_size", "batch_sampler", "sampler", "drop_last", "dataset", "persistent_workers"):
        with pytest.raises(ValueError, match=f"^{name} attribute should not be set after DataLoader is initialized$"):
            setattr(loader, name, None)
    loader.num_workers = 1  # not frozen, as in PyTorch


def test_batches_lengths_and_drop_last():
    ds = TensorDataset(zgrad.arange(10) * 2, zgrad.arange(10).float())
    batches = list(DataLoader(ds, batch_size=4))
    assert len(DataLoader(ds, batch_size=4)) == 3 and [b[0].tolist() for b in batches] == [[0, 2, 4, 6], [8, 10, 12, 14],
                                                                                           [16, 18]]
    assert batches[0][1].dtype == zgrad.float32 and batches[0][0].dtype == zgrad.int64
    assert len(DataLoader(ds, batch_size=4, drop_last=True)) == 2 == len(list(DataLoader(ds, batch_size=4, drop_last=True)))
    d = next(iter(DataLoader(Squares(), batch_size=3)))
    assert d["x"].dtype == zgrad.float64 and d["y"].tolist() == [0, 1, 4]


def test_without_batching_samples_are_converted_not_collated():
    class Arrays(Dataset):
        def __getitem__(self, i):
            return np.full(2, i), i

        def __len__(self):
            return 3

    items = list(DataLoader(Arrays(), batch_size=None))
    assert len(items) == 3 and isinstance(items[1], list)
    assert isinstance(items[1][0], zgrad.Tensor) and items[1][0].tolist() == [1, 1] and items[1][1] == 1


def test_custom_sampler_batch_sampler_and_collate_fn():
    assert [b.tolist() for b in DataLoader(range(10), sampler=[9, 1, 5], batch_size=2)] == [[9, 1], [5]]
    assert [b.tolist() for b in DataLoader(range(10), batch_sampler=[[3, 4], [0]])] == [[3, 4], [0]]
    assert list(DataLoader(range(5), batch_size=2, collate_fn=sum)) == [1, 5, 4]


def test_shuffle_is_reproducible_from_the_seed_and_the_generator():
    def epoch(**kwargs):
        return [b.tolist() for b in DataLoader(range(20), batch_size=5, shuffle=True, **kwargs)]

    zgrad.manual_seed(4)
    first, second = epoch(), epoch()
    assert first != second and sorted(sum(first, [])) == list(range(20))
    zgrad.manual_seed(4)
    assert [epoch(), epoch()] == [first, second]
    assert epoch(generator=np.random.default_rng(1)) == epoch(generator=np.random.default_rng(1))


def test_iterable_dataset_length_and_its_warning():
    loader = DataLoader(Counting(10, reported=4), batch_size=None)
    assert len(loader) == 4
    with pytest.warns(UserWarning) as caught:
        assert [int(x) for x in loader] == list(range(10))
    assert len(caught) == 6 and re.match(r"Length of IterableDataset .* was reported to be 4\(when accessing "
                                         r"len\(dataloader\)\), but 5 samples have been fetched. $", str(caught[0].message))
    batched = DataLoader(Counting(10), batch_size=3)
    assert len(batched) == 4 and [b.tolist() for b in batched] == [[0, 1, 2], [3, 4, 5], [6, 7, 8], [9]]
    dropped = DataLoader(Counting(10), batch_size=3, drop_last=True)
    assert len(dropped) == 3 and len(list(dropped)) == 3
    assert get_worker_info() is None


def test_pin_memory_on_a_machine_without_accelerator_warns_as_torch(monkeypatch):
    import zgrad.utils.data._utils.loader_iter as loader_iter

    monkeypatch.setattr(loader_iter, "accelerator_available", lambda: False)
    with pytest.warns(UserWarning, match=re.escape("'pin_memory' argument is set as true but no accelerator is found, "
                                                   "then device pinned memory won't be used.")):
        batches = list(DataLoader(range(4), batch_size=2, pin_memory=True))
    assert [b.tolist() for b in batches] == [[0, 1], [2, 3]]


def test_pin_memory_with_the_cuda_backend_copies_into_the_pinned_pool():
    if not zgrad.accelerator.is_available():
        pytest.skip("no CUDA backend here (neither a GPU nor Numba's simulator)")
    source = TensorDataset(zgrad.arange(6).float())
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        batches = list(DataLoader(source, batch_size=4, pin_memory=True))
    assert [b[0].tolist() for b in batches] == [[0.0, 1.0, 2.0, 3.0], [4.0, 5.0]]
    assert type(batches[0][0].numpy().base).__name__ == "_Lease"  # a buffer of the CUDA backend's pinned pool


def test_more_workers_than_cpus_warns():
    import os

    many = len(os.sched_getaffinity(0)) + 1
    with pytest.warns(UserWarning, match=f"This DataLoader will create {many} worker processes in total. Our suggested "
                                         "max number of worker in current system is"):
        DataLoader(range(3), num_workers=many)
