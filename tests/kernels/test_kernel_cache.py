"""The on-disk cache of zgrad's Numba kernels under concurrent compiles.

Several processes (pytest workers, ranks) compile different signatures of one kernel at the same
time. Numba's own cache file picks a data file number from the index it read: two writers can pick
the same one, and a signature then loads another signature's machine code. zgrad's cache file
saves and loads under a lock. Processes that start together on a cold cache compile each kernel
once: the first to need it compiles, the others wait and load its machine code.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import subprocess
import sys

from paths import REPO

from zgrad.kernels._jit import _LockedCacheFile

WRITERS, KEYS_EACH = 4, 12


def _write_entries(cache_dir: str, writer: int) -> None:
    cache = _LockedCacheFile(cache_dir, "kernel-1.py311", "stamp")
    for k in range(KEYS_EACH):
        cache.save(("signature", writer, k), f"code of {writer}/{k}")


def test_concurrent_saves_keep_every_signature_with_its_own_code(tmp_path):
    context = multiprocessing.get_context("fork")
    writers = [context.Process(target=_write_entries, args=(str(tmp_path), w)) for w in range(WRITERS)]
    for process in writers:
        process.start()
    for process in writers:
        process.join(timeout=60)
        assert process.exitcode == 0
    cache = _LockedCacheFile(str(tmp_path), "kernel-1.py311", "stamp")
    for w in range(WRITERS):
        for k in range(KEYS_EACH):
            assert cache.load(("signature", w, k)) == f"code of {w}/{k}"


def test_kernels_use_the_locked_cache_file():
    from zgrad.kernels.cpu import kernels

    for dispatcher in (kernels.scan.running_rows.serial, kernels.scan.running_rows.parallel):
        assert isinstance(dispatcher._cache._cache_file, _LockedCacheFile)


_COMPILE_ONE_KERNEL = """
import json, numpy as np
from zgrad.kernels.cpu.kernels import activation
x = np.ones(4, np.float64)
activation.leaky_relu_forward.serial(x, 0.5, np.empty_like(x))
stats = activation.leaky_relu_forward.serial.stats
print(json.dumps([sum(stats.cache_hits.values()), sum(stats.cache_misses.values())]))
"""


def test_processes_on_a_cold_cache_compile_a_kernel_once_and_the_others_load_it(tmp_path):
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path), "PYTHONPATH": str(REPO)}
    processes = [subprocess.Popen([sys.executable, "-c", _COMPILE_ONE_KERNEL], env=env, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True) for _ in range(3)]
    results = []
    try:
        for process in processes:
            out, err = process.communicate(timeout=120)
            assert process.returncode == 0, err
            results.append(json.loads(out.splitlines()[-1]))
    finally:
        for process in processes:
            process.kill()
    hits, misses = map(sum, zip(*results))
    assert (hits, misses) == (2, 1), results


_HOLD_THE_COMPILE_LOCK = """
import sys, time
from zgrad.kernels.cpu.kernels import activation
with activation.leaky_relu_forward.serial._cache._cache_file.compiling():
    print("held", flush=True)
    time.sleep(60)
"""


def test_a_process_that_waits_too_long_for_anothers_compile_compiles_itself(tmp_path):
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path), "PYTHONPATH": str(REPO)}
    holder = subprocess.Popen([sys.executable, "-c", _HOLD_THE_COMPILE_LOCK], env=env, stdout=subprocess.PIPE,
                              text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        script = "from zgrad.kernels import _jit; _jit.COMPILE_WAIT_S = 0.5\n" + _COMPILE_ONE_KERNEL
        run = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=45,
                             check=False)
        assert run.returncode == 0, run.stderr
        assert json.loads(run.stdout.splitlines()[-1]) == [0, 1]  # compiled itself, the lock still held
        assert holder.poll() is None
    finally:
        holder.kill()
        holder.wait(timeout=30)
