"""Run every worker of an inproc job as a thread of this process (started by ``zgrad-launch``).

Usage: ``python -m zgrad.launch.inproc_runner ENTRY ARGS...`` with ``ZGRAD_CONFIG`` set, where
ENTRY is ``-m MODULE`` or a script path. The entry must define ``main(argv)`` (or ``main()``)
and join the mesh with ``rpc.init_rpc()`` (or :func:`zgrad.launch.worker.init_rpc`), which picks
up the identity this runner gives each thread (:mod:`zgrad.distributed.identity`). Output lines are prefixed with ``[worker name]``. The exit status is
that of the first worker that failed (an exception counts as 1).
"""

from __future__ import annotations

import importlib
import inspect
import io
import os
import runpy
import sys
import threading
import traceback
import types

from zgrad.config import load_config
from zgrad.distributed.identity import WorkerIdentity, set_thread_identity

GRACE_S = 5.0


class PrefixedStream(io.TextIOBase):
    """A text stream that writes whole lines, each prefixed with its thread's worker name."""

    def __init__(self, target):
        self.target = target
        self.lock = threading.Lock()
        self.local = threading.local()

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        pending = getattr(self.local, "pending", "") + text
        *lines, self.local.pending = pending.split("\n")
        if lines:
            prefix = f"[{getattr(self.local, 'name', 'inproc')}] "
            with self.lock:
                self.target.write("".join(f"{prefix}{line}\n" for line in lines))
                self.target.flush()
        return len(text)

    def flush(self) -> None:
        with self.lock:
            self.target.flush()


def load_main(argv: list[str]):
    """Import the entry as ``python`` would run it, without running its ``__main__`` block: a
    module for ``-m MODULE``; a script as ``__main__`` (as multiprocessing's spawn loads it in a
    child: its functions and classes are RPC targets the allow-list admits, and ``sys.argv`` is
    ``[script, args...]`` for argparse at module level). Return its ``main`` and the arguments."""
    if argv[:1] == ["-m"]:
        sys.argv = [argv[1], *argv[2:]]
        return importlib.import_module(argv[1]).main, argv[2:]
    sys.argv = list(argv)
    namespace = runpy.run_path(argv[0], run_name="__mp_main__")
    if "main" not in namespace:
        raise SystemExit(f"inproc entry {argv[0]!r} defines no main(argv) function")
    script = types.ModuleType("__mp_main__")
    script.__dict__.update(namespace)
    sys.modules["__main__"] = sys.modules["__mp_main__"] = script
    return namespace["main"], argv[1:]


def main() -> int:
    config = load_config(os.environ["ZGRAD_CONFIG"])
    entry, args = load_main(sys.argv[1:])
    takes_argv = bool(inspect.signature(entry).parameters)
    stream = PrefixedStream(sys.stdout)
    sys.stdout = sys.stderr = stream
    names = [w.name for w in config.workers]
    codes: list[int | None] = [None] * len(names)
    done = threading.Event()

    def worker(rank: int) -> None:
        stream.local.name = names[rank]
        set_thread_identity(WorkerIdentity(names[rank], rank, len(names), config))
        try:
            result = entry(list(args)) if takes_argv else entry()
            codes[rank] = result if isinstance(result, int) else 0
        except SystemExit as exc:
            codes[rank] = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        except BaseException:  # noqa: BLE001 - reported as this worker's failure
            sys.stdout.write(traceback.format_exc())
            codes[rank] = 1
        if codes[rank]:
            done.set()

    threads = [threading.Thread(target=worker, args=(r,), name=n, daemon=True) for r, n in enumerate(names)]
    for t in threads:
        t.start()
    while any(t.is_alive() for t in threads) and not done.is_set():
        done.wait(0.1)
    failed = next((r for r, c in enumerate(codes) if c), None)
    if failed is None:
        return 0
    for t in threads:
        t.join(GRACE_S)
    sys.__stdout__.write(f"[inproc] worker {names[failed]} failed with exit status {codes[failed]}\n")
    sys.__stdout__.flush()
    os._exit(codes[failed])


if __name__ == "__main__":
    sys.exit(main())
