"""Datasets and functions for the DataLoader worker tests, at module level so that workers started
with ``spawn`` or ``forkserver`` can import them. Those that coordinate with the test take
``multiprocessing`` events and queues (made with the ``fork`` context the tests use)."""

from __future__ import annotations

import collections
import os
import random
import signal

import numpy as np

import zgrad
from zgrad.utils.data import Dataset, IterableDataset, get_worker_info

WAIT_S = 60.0
Pair = collections.namedtuple("Pair", ["image", "label"])


class Batch:
    """A custom batch class a collate_fn returns (it travels as its class plus its attributes)."""

    def __init__(self, images, names):
        self.images, self.names = images, names


def collate_into_batch(samples):
    return Batch(zgrad.stack([s["image"] for s in samples]), [s["name"] for s in samples])


class Mixed(Dataset):
    """Samples with a tensor, a numpy array, numbers, a string, a namedtuple and None-free dicts."""

    def __len__(self):
        return 23

    def __getitem__(self, i):
        image = zgrad.arange(12).reshape(3, 4).float() * i
        return {"image": image, "array": np.full((2,), i, np.int16), "id": i, "weight": i / 2, "name": f"n{i}",
                "pair": Pair(image[0], i % 3)}


class Blocking(Dataset):
    """Item ``i`` waits for ``release`` when ``i >= first_blocked``; ``started`` is set by the first
    item that waits; ``worker_init`` reports (worker id, pid) on ``pids``."""

    def __init__(self, n, first_blocked, release, started=None):
        self.n, self.first_blocked, self.release, self.started = n, first_blocked, release, started

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if i >= self.first_blocked:
            if self.started is not None:
                self.started.set()
            self.release.wait(WAIT_S)
        return i


def report_pid(queue):
    def init(worker_id):
        queue.put((worker_id, os.getpid()))

    return init


class OutOfOrder(Dataset):
    """Batch 0 (items 0-1, on worker 0) is finished only after batch 1 (items 2-3, on worker 1)."""

    def __init__(self, batch1_done):
        self.batch1_done = batch1_done

    def __len__(self):
        return 8

    def __getitem__(self, i):
        if i == 0:
            assert self.batch1_done.wait(WAIT_S), "batch 1 never finished"
        if i == 3:
            self.batch1_done.set()
        return i


class Failing(Dataset):
    """Item 3 raises ValueError, item 5 KeyError, item 7 an exception that needs two arguments."""

    def __len__(self):
        return 10

    def __getitem__(self, i):
        if i == 3:
            raise ValueError("bad index 3")
        if i == 5:
            raise KeyError("k")
        if i == 7:
            raise TwoArgumentError("a", "b")
        return i


class TwoArgumentError(Exception):
    def __init__(self, a, b):
        super().__init__(f"{a}/{b}")


class KillsItself(Dataset):
    def __len__(self):
        return 100

    def __getitem__(self, i):
        if i == 10:
            os.kill(os.getpid(), signal.SIGKILL)
        return i


class Seeds(Dataset):
    """What a worker's generators give: (worker id, num_workers, seed, zgrad, numpy, random)."""

    def __len__(self):
        return 8

    def __getitem__(self, i):
        info = get_worker_info()
        return [info.id, info.num_workers, info.seed, float(zgrad.rand(1).item()), float(np.random.rand()),
                random.random()]


class Range(IterableDataset):
    """``range(start, end)``; with ``split``, each worker yields its own contiguous share."""

    def __init__(self, start, end, split=True):
        self.start, self.end, self.split = start, end, split

    def __iter__(self):
        info = get_worker_info()
        if info is None or not self.split:
            return iter(range(self.start, self.end))
        per_worker = -(-(self.end - self.start) // info.num_workers)
        lo = self.start + info.id * per_worker
        return iter(range(lo, min(lo + per_worker, self.end)))


def shard_in_init(worker_id):
    """A worker_init_fn that splits a :class:`Range` through ``get_worker_info().dataset``."""
    info = get_worker_info()
    dataset = info.dataset
    per_worker = -(-(dataset.end - dataset.start) // info.num_workers)
    dataset.start += worker_id * per_worker
    dataset.end = min(dataset.start + per_worker, dataset.end)
    dataset.split = False


def failing_init(worker_id):
    raise RuntimeError(f"init of worker {worker_id} failed")


class Sized(Range):
    """A :class:`Range` that reports a length of ``reported``."""

    def __init__(self, start, end, reported, split=True):
        super().__init__(start, end, split)
        self.reported = reported

    def __len__(self):
        return self.reported
