"""The on-disk cache of zgrad's Numba kernels under concurrent compiles.

Several processes (pytest workers, ranks) compile different signatures of one kernel at the same
time. Numba's own cache file picks a data file number from the index it read: two writers can pick
the same one, and a signature then loads another signature's machine code. zgrad's cache file
saves and loads under a lock.
"""

from __future__ import annotations

import multiprocessing

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
