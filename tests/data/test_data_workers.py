"""DataLoader with worker processes: the same batches in the same order as in the main process,
batches through shared memory, worker errors and deaths raised at once (never a hang), seeds and
worker info as PyTorch's, iterable datasets, persistent workers, start methods, and nothing left
behind: no worker, no shared-memory segment, whether the loader is dropped or its process dies."""

from __future__ import annotations

import gc
import multiprocessing
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

import data_targets as T
import zgrad
from helpers import require_torch
from zgrad.errors import ZgradError, ZgradTimeoutError
from zgrad.utils.data import DataLoader, TensorDataset
from zgrad.utils.data._utils.shared_memory import SPARE_SEGMENTS
from zgrad.utils.data._utils.worker import numpy_seed_state
from paths import REPO, SUPPORT

pytestmark = pytest.mark.timeout(180)

HERE = SUPPORT  # data_targets, the workers' functions, is a helper
FORK = multiprocessing.get_context("fork")


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie still answers kill(0): look at its state
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def wait_until(predicate, timeout_s=30.0):
    deadline = time.monotonic() + timeout_s
    while not predicate() and time.monotonic() < deadline:
        time.sleep(0.05)
    return predicate()


def shared_memory_fds() -> int:
    """This process's open shared-memory segments of DataLoaders."""
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            count += os.readlink(f"/proc/self/fd/{fd}").startswith("/memfd:zgrad-dataloader")
        except OSError:
            pass
    return count


def shared_memory_maps() -> int:
    """This process's mappings of DataLoader shared-memory segments."""
    return sum("memfd:zgrad-dataloader" in line for line in Path("/proc/self/maps").read_text().splitlines())


@pytest.fixture(autouse=True)
def no_segment_mapped_around_each_test(request):
    """Each test starts and ends with no DataLoader segment mapped here. An earlier test's batches
    may still be alive in a reference cycle until the collector runs (``pytest.raises`` keeps one:
    the test's frame holds the ExceptionInfo whose traceback holds the frame), and counts of
    mappings would see them: collected first, so each test counts its own."""
    gc.collect()
    assert shared_memory_maps() == 0, "DataLoader shared memory was still mapped before the test"
    yield
    gc.collect()
    assert shared_memory_maps() == 0, f"{request.node.name} left DataLoader shared memory mapped after a collection"


def plain(value):
    """A batch as comparable Python values (tensors and arrays by dtype and contents)."""
    if isinstance(value, (zgrad.Tensor, np.ndarray)):
        array = np.asarray(value.numpy() if isinstance(value, zgrad.Tensor) else value)
        return (type(value).__name__, str(array.dtype), array.tolist())
    if isinstance(value, T.Batch):
        return ("Batch", plain(value.images), value.names)
    if isinstance(value, tuple) and hasattr(value, "_fields"):
        return (type(value).__name__, *(plain(v) for v in value))
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, [plain(v) for v in value])
    return value


LOADERS = {
    "mixed samples": lambda **kw: DataLoader(T.Mixed(), batch_size=4, **kw),
    "drop_last": lambda **kw: DataLoader(T.Mixed(), batch_size=5, drop_last=True, **kw),
    "shuffled tensor dataset": lambda **kw: DataLoader(TensorDataset(zgrad.arange(40).reshape(20, 2), zgrad.rand(20)),
                                                       batch_size=3, shuffle=True, **kw),
    "no batching": lambda **kw: DataLoader(T.Mixed(), batch_size=None, **kw),
    "custom collate_fn": lambda **kw: DataLoader(T.Mixed(), batch_size=6, collate_fn=T.collate_into_batch, **kw),
    "empty dataset": lambda **kw: DataLoader([], batch_size=2, **kw),
}


@pytest.mark.parametrize("name", list(LOADERS))
def test_workers_return_the_batches_of_the_main_process(name):
    zgrad.manual_seed(7)
    expected = [plain(b) for b in LOADERS[name]()]
    zgrad.manual_seed(7)
    assert [plain(b) for b in LOADERS[name](num_workers=2)] == expected
    assert shared_memory_fds() == 0


def test_batches_come_out_in_sampler_order_when_workers_finish_out_of_order():
    loader = DataLoader(T.OutOfOrder(FORK.Event()), batch_size=2, num_workers=2)
    assert [b.tolist() for b in loader] == [[0, 1], [2, 3], [4, 5], [6, 7]]


def test_batches_travel_in_shared_memory():
    images, labels = next(iter(DataLoader(TensorDataset(zgrad.rand(8, 4, 4), zgrad.arange(8)), batch_size=8,
                                          num_workers=1)))
    for tensor in (images, labels):
        base = tensor.numpy()
        while isinstance(base, np.ndarray):
            base = base.base
        assert type(base).__name__ == "_BatchView", "the batch was copied, not mapped"
    images += 1  # writable, like any tensor
    assert shared_memory_fds() == 0  # the mapping is all that holds the memory
    assert shared_memory_maps() == 1
    del images, labels, tensor, base
    assert shared_memory_maps() == 0


def test_segments_are_reused_and_follow_what_the_program_holds():
    def epoch(loader):
        return sum(x.shape == (4, 8) for (x,) in loader)

    loader = DataLoader(TensorDataset(zgrad.rand(400, 8)), batch_size=4, num_workers=2, persistent_workers=True)
    assert [epoch(loader) for _ in range(3)] == [100] * 3
    assert shared_memory_maps() <= 2 * (SPARE_SEGMENTS + 2 + 2)  # per worker: spares, in flight, held
    held = [x for (x,) in loader]  # every batch of an epoch kept: a segment each
    assert len(held) == 100 and shared_memory_maps() >= 100 and shared_memory_fds() == 0
    del held
    assert epoch(loader) == 100  # its requests tell the workers, who drop what is beyond their spares
    assert shared_memory_maps() <= 2 * (SPARE_SEGMENTS + 2 + 2)
    del loader
    gc.collect()
    assert shared_memory_maps() == 0


def test_worker_exceptions_are_raised_with_the_workers_traceback():
    it = iter(DataLoader(T.Failing(), batch_size=2, num_workers=2))
    assert next(it).tolist() == [0, 1]
    with pytest.raises(ValueError) as info:
        next(it)
    assert re.match(r"Caught ValueError in DataLoader worker process 1\.\nOriginal Traceback \(most recent call "
                    r"last\):\n", str(info.value))
    assert 'raise ValueError("bad index 3")' in str(info.value) and str(info.value).endswith("ValueError: bad index 3\n")
    with pytest.raises(KeyError) as info:
        next(it)
    assert str(info.value).startswith("Caught KeyError in DataLoader worker process 0.\nOriginal Traceback")
    with pytest.raises(ZgradError, match=r"Caught TwoArgumentError in DataLoader worker process 1\.\nOriginal") as info:
        next(it)
    assert next(it).tolist() == [8, 9]  # loading goes on after an error, as in PyTorch


def test_an_iterator_that_raised_a_workers_error_goes_with_its_last_reference():
    """Without the cyclic collector: the raised error must not hold the iterator's frames in a
    cycle, or its workers and its batches' shared memory outlive it."""
    pids = FORK.Queue()

    def fail_once():
        it = iter(DataLoader(T.Failing(), batch_size=2, num_workers=2, worker_init_fn=T.report_pid(pids)))
        next(it)
        try:
            next(it)
        except ValueError:
            pass

    gc.disable()
    try:
        fail_once()
        assert shared_memory_maps() == 0
    finally:
        gc.enable()
    workers = [pids.get(timeout=T.WAIT_S)[1] for _ in range(2)]
    assert wait_until(lambda: not any(alive(pid) for pid in workers))


def test_an_error_in_worker_init_fn_is_raised_for_the_first_batch():
    with pytest.raises(RuntimeError, match=r"Caught RuntimeError in DataLoader worker process 0\.(?s:.*)init of "
                                           r"worker 0 failed"):
        list(DataLoader(range(4), batch_size=2, num_workers=1, worker_init_fn=T.failing_init))


def test_a_worker_killed_by_a_signal_is_reported_at_once():
    pids = FORK.Queue()
    release = FORK.Event()
    loader = DataLoader(T.Blocking(40, 4, release), batch_size=2, num_workers=2, worker_init_fn=T.report_pid(pids))
    it = iter(loader)
    assert next(it).tolist() == [0, 1]
    workers = dict(pids.get(timeout=T.WAIT_S) for _ in range(2))
    victim = workers[0]
    os.kill(victim, signal.SIGKILL)
    start = time.monotonic()
    with pytest.raises(ZgradError, match=re.escape(f"DataLoader worker (pid {victim}) is killed by signal: Killed. ")):
        for _ in it:
            pass
    assert time.monotonic() - start < 30, "the death was noticed late"
    assert wait_until(lambda: not any(alive(pid) for pid in workers.values())), "the other worker was left running"


def test_a_worker_that_kills_itself_mid_batch():
    with pytest.raises(ZgradError, match=r"^DataLoader worker \(pid \d+\) is killed by signal: Killed\. $"):
        list(DataLoader(T.KillsItself(), batch_size=2, num_workers=2))


def test_timeout_raises_and_stops_stuck_workers():
    pids = FORK.Queue()
    loader = DataLoader(T.Blocking(4, 0, FORK.Event()), batch_size=2, num_workers=1, timeout=0.3,
                        worker_init_fn=T.report_pid(pids))
    start = time.monotonic()
    with pytest.raises(ZgradTimeoutError, match=r"^DataLoader timed out after 0\.3 seconds$"):
        next(iter(loader))
    assert time.monotonic() - start < 30
    _, pid = pids.get(timeout=T.WAIT_S)
    assert wait_until(lambda: not alive(pid))


@pytest.mark.parametrize("how", ["exhausted", "iterator dropped", "persistent loader dropped"])
def test_no_worker_or_segment_is_left_behind(how):
    pids = FORK.Queue()
    loader = DataLoader(TensorDataset(zgrad.rand(32, 16)), batch_size=4, num_workers=2,
                        persistent_workers=how == "persistent loader dropped", worker_init_fn=T.report_pid(pids))
    shm_before = set(os.listdir("/dev/shm")) if os.path.isdir("/dev/shm") else set()
    it = iter(loader)
    kept = next(it)
    workers = [pids.get(timeout=T.WAIT_S)[1] for _ in range(2)]
    if how == "exhausted":
        list(it)
    else:
        del it
        if how == "persistent loader dropped":
            del loader
        gc.collect()
    assert wait_until(lambda: not any(alive(pid) for pid in workers)), f"workers left running ({how})"
    assert kept[0].shape == (4, 16) and shared_memory_fds() == 0
    del kept
    assert shared_memory_maps() == 0
    if os.path.isdir("/dev/shm"):
        assert set(os.listdir("/dev/shm")) - shm_before == set()


@pytest.mark.parametrize("ending", ["exits", "is killed"])
def test_workers_die_with_their_process(tmp_path, ending):
    script = textwrap.dedent(f"""
        import os, sys, time
        sys.path.insert(0, {str(HERE)!r})
        import zgrad
        from zgrad.utils.data import DataLoader, TensorDataset
        loader = DataLoader(TensorDataset(zgrad.rand(64, 4)), batch_size=4, num_workers=2, persistent_workers=True)
        it = iter(loader)
        kept = next(it)  # a batch still held at exit, in shared memory
        print(*it._pool.pids, flush=True)
        if {ending == "is killed"!r}:
            time.sleep(120)
        """)
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])})
    try:
        workers = [int(p) for p in proc.stdout.readline().split()]
        assert len(workers) == 2
        if ending == "is killed":
            proc.kill()
        assert proc.wait(60) == (-signal.SIGKILL if ending == "is killed" else 0)
        assert wait_until(lambda: not any(alive(pid) for pid in workers)), f"workers outlived a process that {ending}"
    finally:
        proc.kill()
        proc.wait(10)


def test_worker_info_and_seeds_are_pytorchs():
    def run():
        zgrad.manual_seed(5)
        return list(DataLoader(T.Seeds(), batch_size=None, num_workers=2))  # rows: items 0, 1, 2, ... by turns

    rows = run()
    assert rows == run()  # reproducible from zgrad.manual_seed
    first0, first1 = rows[0], rows[1]  # the first item of worker 0 and of worker 1
    assert [r[0] for r in rows] == [0, 1] * 4 and all(r[1] == 2 for r in rows)
    base = first0[2]
    assert first1[2] == base + 1  # seed = base_seed + worker id
    assert first0[4] == np.random.RandomState(numpy_seed_state(base, 0)).rand()
    assert first1[4] == np.random.RandomState(numpy_seed_state(base, 1)).rand()
    assert first0[3] != first1[3] and first0[5] != first1[5]
    zgrad.manual_seed(6)
    assert list(DataLoader(T.Seeds(), batch_size=None, num_workers=2))[0][2] != base


@pytest.mark.torch
def test_numpy_seeds_are_torchs():
    require_torch()
    from torch.utils.data._utils.worker import _generate_state

    for base, worker in [(0, 0), (1, 3), (2**63 - 1, 7), (123456789123, 1)]:
        assert numpy_seed_state(base, worker) == _generate_state(base, worker)


def test_worker_init_fn_and_iterable_datasets():
    split = [int(x) for x in DataLoader(T.Range(3, 11), batch_size=None, num_workers=2)]
    assert sorted(split) == list(range(3, 11)) and split[:2] == [3, 7]  # round-robin over the workers
    sharded = [int(x) for x in DataLoader(T.Range(3, 11, split=False), batch_size=None, num_workers=2,
                                          worker_init_fn=T.shard_in_init)]
    assert sharded == split
    duplicated = [int(x) for x in DataLoader(T.Range(0, 3, split=False), batch_size=None, num_workers=2)]
    assert duplicated == [0, 0, 1, 1, 2, 2]  # every worker iterates its own copy
    batches = [b.tolist() for b in DataLoader(T.Range(0, 7), batch_size=2, num_workers=2)]
    assert batches == [[0, 1], [4, 5], [2, 3], [6]]
    dropped = [b.tolist() for b in DataLoader(T.Range(0, 7), batch_size=2, num_workers=2, drop_last=True)]
    assert dropped == [[0, 1], [4, 5], [2, 3]]


def test_iterable_dataset_length_warning_with_workers():
    loader = DataLoader(T.Sized(0, 6, reported=4, split=False), batch_size=None, num_workers=2)
    assert len(loader) == 4
    with pytest.warns(UserWarning) as caught:
        assert len(list(loader)) == 12  # both workers iterate the whole copy
    assert len(caught) == 8 and str(caught[0].message).endswith(
        "but 5 samples have been fetched. For multiprocessing data-loading, this could be caused by not properly "
        "configuring the IterableDataset replica at each worker. Please see "
        "https://pytorch.org/docs/stable/data.html#torch.utils.data.IterableDataset for examples.")


def test_prefetch_factor_zero_is_refused_when_workers_start():
    loader = DataLoader(range(4), num_workers=1, prefetch_factor=0)
    with pytest.raises(AssertionError, match="prefetch_factor must be greater than 0 for MultiProcessingDataLoaderIter"):
        iter(loader)


@pytest.mark.torch
@pytest.mark.filterwarnings("ignore:This DataLoader will create 3 worker processes")
def test_iterable_dataset_order_with_workers_is_torchs():
    torch = require_torch()

    class TorchRange(torch.utils.data.IterableDataset):
        def __init__(self, n):
            self.n = n

        def __iter__(self):
            info = torch.utils.data.get_worker_info()
            return iter(range(info.id, self.n, info.num_workers)) if info else iter(range(self.n))

    class Strided(zgrad.utils.data.IterableDataset):
        def __init__(self, n):
            self.n = n

        def __iter__(self):
            info = zgrad.utils.data.get_worker_info()
            return iter(range(info.id, self.n, info.num_workers)) if info else iter(range(self.n))

    for n, batch_size, workers in [(10, 3, 2), (7, 2, 3), (5, None, 2), (9, 4, 3)]:
        theirs = [b.tolist() if hasattr(b, "tolist") else b
                  for b in torch.utils.data.DataLoader(TorchRange(n), batch_size=batch_size, num_workers=workers)]
        ours = [b.tolist() if hasattr(b, "tolist") else b
                for b in DataLoader(Strided(n), batch_size=batch_size, num_workers=workers)]
        assert ours == theirs


def test_persistent_workers_keep_their_processes_and_reshuffle():
    loader = DataLoader(range(12), batch_size=4, shuffle=True, num_workers=2, persistent_workers=True)
    it = iter(loader)
    workers = it._pool.pids
    epochs = [[b.tolist() for b in it]] + [[b.tolist() for b in loader] for _ in range(2)]
    assert all(sorted(sum(e, [])) == list(range(12)) for e in epochs) and epochs[0] != epochs[1]
    partial = iter(loader)
    next(partial)  # an epoch left unfinished: what it had in flight is dropped
    assert sorted(sum((b.tolist() for b in loader), [])) == list(range(12))
    assert iter(loader) is it and it._pool.pids == workers and all(alive(pid) for pid in workers)


def test_prefetch_factor_bounds_the_batches_in_flight():
    release = FORK.Event()
    started = FORK.Event()
    loader = DataLoader(T.Blocking(40, 0, release, started), batch_size=2, num_workers=2, prefetch_factor=3)
    it = iter(loader)
    assert it._send_idx - it._rcvd_idx == 6  # in flight: prefetch_factor * num_workers
    assert started.wait(T.WAIT_S)
    release.set()
    assert next(it).tolist() == [0, 1] and it._send_idx - it._rcvd_idx == 6  # one handed out, one more sent
    assert len(list(it)) == 19


@pytest.mark.parametrize("method", ["spawn", "forkserver"])
def test_other_start_methods(method):
    expected = [plain(b) for b in DataLoader(T.Mixed(), batch_size=8)]
    loader = DataLoader(T.Mixed(), batch_size=8, num_workers=2, multiprocessing_context=method)
    assert [plain(b) for b in loader] == expected
    context = multiprocessing.get_context(method)
    assert [plain(b) for b in DataLoader(T.Mixed(), batch_size=8, num_workers=1, multiprocessing_context=context)] \
        == expected


def test_pin_memory_with_workers():
    batches = list(DataLoader(TensorDataset(zgrad.arange(6).float()), batch_size=4, num_workers=2, pin_memory=True))
    assert [b[0].tolist() for b in batches] == [[0.0, 1.0, 2.0, 3.0], [4.0, 5.0]]
