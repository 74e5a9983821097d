"""Datasets, samplers, random_split and DistributedSampler: PyTorch's results where they are
deterministic (compared with torch), PyTorch's properties where they are random, PyTorch's errors."""

from __future__ import annotations

import collections
import math
import re

import numpy as np
import pytest

import zgrad
from helpers import require_torch
from pg_harness import run_ranks
from zgrad.errors import ZgradError
from zgrad.utils.data import (
    BatchSampler, ChainDataset, ConcatDataset, Dataset, IterableDataset, RandomSampler, SequentialSampler, Subset,
    SubsetRandomSampler, TensorDataset, WeightedRandomSampler, random_split,
)
from zgrad.utils.data.distributed import DistributedSampler


def raises(exc, text):
    return pytest.raises(exc, match="^" + re.escape(text) + "$")


# --- datasets -------------------------------------------------------------------------------------

def test_tensor_dataset_indexes_every_tensor():
    x, y = zgrad.arange(12).reshape(6, 2), zgrad.arange(6) * 10
    ds = TensorDataset(x, y)
    assert len(ds) == 6
    a, b = ds[4]
    assert a.tolist() == [8, 9] and b.item() == 40
    with raises(AssertionError, "Size mismatch between tensors"):
        TensorDataset(x, zgrad.arange(5))


def test_concat_subset_and_chain():
    ds = ConcatDataset([list(range(3)), list(range(10, 15))])
    assert len(ds) == 8 and ds.cumulative_sizes == [3, 8]
    assert [ds[i] for i in range(8)] == [0, 1, 2, 10, 11, 12, 13, 14]
    assert ds[-1] == 14 and ds[-8] == 0
    with raises(ValueError, "absolute value of index should not exceed dataset length"):
        ds[-9]
    with raises(AssertionError, "datasets should not be an empty iterable"):
        ConcatDataset([])

    class Stream(IterableDataset):
        def __init__(self, items):
            self.items = items

        def __iter__(self):
            return iter(self.items)

        def __len__(self):
            return len(self.items)

    with raises(AssertionError, "ConcatDataset does not support IterableDataset"):
        ConcatDataset([Stream([1])])
    chained = Stream([1, 2]) + Stream([3])
    assert isinstance(chained, ChainDataset) and list(chained) == [1, 2, 3] and len(chained) == 3

    class Items(Dataset):
        def __getitem__(self, i):
            return i * 2

        def __len__(self):
            return 5

    assert isinstance(Items() + Items(), ConcatDataset)
    sub = Subset(Items(), [4, 0, 2])
    assert len(sub) == 3 and [sub[i] for i in range(3)] == [8, 0, 4] and sub.__getitems__([0, 2]) == [8, 4]
    with raises(NotImplementedError, "Subclasses of Dataset should implement __getitem__."):
        Dataset()[0]


def test_subset_subclass_must_override_getitems():
    class Shifted(Subset):
        def __getitem__(self, idx):
            return super().__getitem__(idx) + 1

    with pytest.raises(NotImplementedError, match="overrides __getitem__ but not __getitems__"):
        Shifted(list(range(3)), [0])


# --- samplers -------------------------------------------------------------------------------------

@pytest.mark.torch
@pytest.mark.parametrize("n, batch_size, drop_last", [(10, 3, False), (10, 3, True), (9, 3, True), (1, 4, False),
                                                       (1, 4, True), (0, 2, False)])
def test_batch_and_sequential_samplers_match_torch(n, batch_size, drop_last):
    torch = require_torch()
    ours = BatchSampler(SequentialSampler(range(n)), batch_size, drop_last)
    theirs = torch.utils.data.BatchSampler(torch.utils.data.SequentialSampler(range(n)), batch_size, drop_last)
    assert list(ours) == list(theirs) and len(ours) == len(theirs)


@pytest.mark.torch
def test_sampler_argument_errors_match_torch():
    torch = require_torch()
    cases = [
        lambda m: m.RandomSampler(range(3), replacement=1),
        lambda m: m.RandomSampler(range(3), num_samples=0),
        lambda m: m.RandomSampler([]),
        lambda m: m.BatchSampler(range(3), 0, False),
        lambda m: m.BatchSampler(range(3), True, False),
        lambda m: m.BatchSampler(range(3), 2, 1),
        lambda m: m.WeightedRandomSampler([0.1], 0),
        lambda m: m.WeightedRandomSampler([0.1], 1, replacement=1),
        lambda m: m.WeightedRandomSampler([[0.1, 0.9]], 1),
    ]
    for case in cases:
        with pytest.raises(Exception) as theirs:
            case(torch.utils.data)
        with pytest.raises(type(theirs.value), match="^" + re.escape(str(theirs.value)) + "$"):
            case(zgrad.utils.data)


@pytest.mark.torch
def test_weighted_sampler_iteration_errors_match_torch():
    torch = require_torch()
    cases = [([0.1, 0.9], 3, False)] + [(w, n, replacement) for w in ([-0.1, 0.9], [0.0, 0.0], [float("inf"), 1.0],
                                                                       [float("nan"), 1.0])
                                        for n in (1, 2) for replacement in (True, False)]
    for weights, n, replacement in cases:
        with pytest.raises(RuntimeError) as theirs:
            list(torch.utils.data.WeightedRandomSampler(weights, n, replacement))
        with pytest.raises(ZgradError, match="^" + re.escape(str(theirs.value)) + "$"):
            list(WeightedRandomSampler(weights, n, replacement))


def test_random_sampler_permutes_and_replaces():
    zgrad.manual_seed(3)
    order = list(RandomSampler(range(50)))
    assert sorted(order) == list(range(50)) and order != list(range(50))
    longer = list(RandomSampler(range(7), num_samples=17))
    assert len(longer) == 17 and sorted(longer[:7]) == sorted(longer[7:14]) == list(range(7))
    assert len(set(longer[14:])) == 3
    drawn = list(RandomSampler(range(4), replacement=True, num_samples=70))
    assert len(drawn) == 70 and set(drawn) <= set(range(4)) and len(set(drawn)) == 4


def test_random_samplers_are_reproducible_from_the_seed_or_their_generator():
    def orders():
        return [list(RandomSampler(range(20))), list(SubsetRandomSampler([5, 6, 7, 8])),
                list(WeightedRandomSampler([1.0, 2.0, 3.0], 10)), [len(s) for s in random_split(range(10), [0.5, 0.5])],
                [list(s) for s in random_split(range(10), [3, 7])]]

    zgrad.manual_seed(11)
    first = orders()
    zgrad.manual_seed(11)
    assert orders() == first
    a = list(RandomSampler(range(20), generator=np.random.default_rng(5)))
    b = list(RandomSampler(range(20), generator=np.random.default_rng(5)))
    assert a == b and sorted(a) == list(range(20))
    with pytest.raises(TypeError, match="generator must be None, a numpy.random.Generator"):
        list(RandomSampler(range(3), generator=42))


def test_subset_random_sampler_yields_its_indices():
    indices = [9, 3, 7, 1]
    assert sorted(SubsetRandomSampler(indices)) == sorted(indices) and len(SubsetRandomSampler(indices)) == 4


def test_weighted_random_sampler_follows_the_weights():
    rng = np.random.default_rng(0)
    counts = collections.Counter(WeightedRandomSampler([1.0, 3.0, 0.0], 4000, generator=rng))
    assert counts[2] == 0 and 0.7 < counts[1] / 4000 < 0.8
    without = list(WeightedRandomSampler([0.0, 5.0, 1.0], 3, replacement=False, generator=rng))
    assert sorted(without) == [0, 1, 2] and without[-1] == 0  # a zero weight comes last, as in torch
    assert len(WeightedRandomSampler(zgrad.tensor([1.0, 2.0]), 5)) == 5


# --- random_split ---------------------------------------------------------------------------------

@pytest.mark.torch
@pytest.mark.filterwarnings("ignore:Length of split")
@pytest.mark.parametrize("n, lengths", [(10, [3, 7]), (10, [0.33, 0.33, 0.34]), (7, [0.5, 0.5]), (11, [0.1, 0.9]),
                                        (30, [0.3, 0.3, 0.4]), (5, [0.25, 0.25, 0.25, 0.25]), (3, [1.0]),
                                        (2, [0.2, 0.2, 0.6])])
def test_random_split_lengths_match_torch(n, lengths):
    torch = require_torch()
    ours = random_split(range(n), lengths)
    theirs = torch.utils.data.random_split(range(n), lengths)
    assert [len(s) for s in ours] == [len(s) for s in theirs]
    assert sorted(i for s in ours for i in s) == list(range(n))


def test_random_split_errors_and_empty_split_warning():
    with raises(ValueError, "Sum of input lengths does not equal the length of the input dataset!"):
        random_split(range(10), [3, 3])
    with raises(ValueError, "Fraction at index 0 is not between 0 and 1"):
        random_split(range(10), [1.2, -0.2])
    with pytest.warns(UserWarning, match=re.escape("Length of split at index 1 is 0. This might result in an empty dataset.")):
        random_split(range(1), [0.5, 0.5])


# --- DistributedSampler ---------------------------------------------------------------------------

CONFIGS = [(world, n, drop_last) for world in (1, 2, 3, 4) for n in (0, 1, 2, 5, 7, 10, 11, 13) for drop_last in (False, True)]


@pytest.mark.torch
@pytest.mark.parametrize("world, n, drop_last", CONFIGS)
def test_distributed_sampler_partitions_as_torch(world, n, drop_last):
    """Without shuffling both take the identity permutation: the padding, the cut and the
    striding must give PyTorch's indices exactly, rank by rank."""
    torch = require_torch()
    for rank in range(world):
        ours = DistributedSampler(range(n), num_replicas=world, rank=rank, shuffle=False, drop_last=drop_last)
        theirs = torch.utils.data.distributed.DistributedSampler(range(n), num_replicas=world, rank=rank,
                                                                 shuffle=False, drop_last=drop_last)
        assert list(ours) == list(theirs)
        assert (len(ours), ours.num_samples, ours.total_size) == (len(theirs), theirs.num_samples, theirs.total_size)


@pytest.mark.parametrize("world, n, drop_last", [c for c in CONFIGS if c[1] > 0])
def test_distributed_sampler_shuffled_shares(world, n, drop_last):
    def shares(seed, epoch):
        samplers = [DistributedSampler(range(n), num_replicas=world, rank=r, seed=seed, drop_last=drop_last)
                    for r in range(world)]
        for s in samplers:
            s.set_epoch(epoch)
        return [list(s) for s in samplers]

    parts = shares(seed=0, epoch=0)
    per_rank = math.ceil((n - world) / world) if drop_last and n % world else math.ceil(n / world)
    assert all(len(p) == per_rank for p in parts)
    flat = [i for p in parts for i in p]
    if drop_last:  # disjoint, and only the tail beyond a multiple of world is dropped
        assert len(set(flat)) == len(flat) == per_rank * world
    else:  # every index, and only the padding repeats
        assert set(flat) == set(range(n)) and len(flat) - len(set(flat)) == per_rank * world - n
    assert shares(seed=0, epoch=0) == parts                     # (seed, epoch) alone decide
    if n >= 5:
        assert shares(seed=0, epoch=1) != parts and shares(seed=1, epoch=0) != parts


def test_distributed_sampler_errors_and_process_group_defaults():
    with raises(ValueError, "Invalid rank 2, rank should be in the interval [0, 1]"):
        DistributedSampler(range(10), num_replicas=2, rank=2)
    with raises(ValueError, "Invalid rank -1, rank should be in the interval [0, 1]"):
        DistributedSampler(range(10), num_replicas=2, rank=-1)
    with pytest.raises(ValueError, match=re.escape("Default process group has not been initialized, please make sure "
                                                   "to call init_process_group.")):
        DistributedSampler(range(10))

    def body(rank):
        sampler = DistributedSampler(range(9), shuffle=False)
        return sampler.num_replicas, sampler.rank, list(sampler)

    assert run_ranks(3, body, kind="inproc") == [(3, 0, [0, 3, 6]), (3, 1, [1, 4, 7]), (3, 2, [2, 5, 8])]
