"""Child processes die with their parent, even when it is killed with SIGKILL and cannot stop them.

Used by the launcher's workers, ``zgrad.multiprocessing.spawn``'s children and DataLoader
workers. On Linux each child asks the kernel for SIGKILL when its parent exits
(``prctl(PR_SET_PDEATHSIG)``, which survives exec; a launcher's workers ask between fork and
exec). SIGKILL rather than SIGTERM: a child that ignores SIGTERM (as a stuck one may) must not
outlive the job, and a parent that was killed can no longer apply its grace period. Elsewhere
nothing is set up and :func:`die_with_parent` returns None.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
from collections.abc import Callable

__all__ = ["die_with_parent", "follow_parent"]

_PR_SET_PDEATHSIG = 1
# Exit status of a worker whose launcher was already gone before it could arrange to follow it.
_ORPHANED_STATUS = 1


def die_with_parent() -> Callable[[], None] | None:
    """Return a ``preexec_fn`` for :class:`subprocess.Popen` that ties the child to this process.

    Only safe where ``Popen`` is called while the calling process has no other threads (the
    launcher starts its output readers after all workers).
    """
    if not sys.platform.startswith("linux"):
        return None
    prctl = ctypes.CDLL(None, use_errno=True).prctl  # resolved here: the child only calls it
    parent = os.getpid()

    def preexec() -> None:
        _follow(prctl, parent)

    return preexec


def follow_parent(parent_pid: int | None) -> None:
    """Called first in a child process (one started by ``multiprocessing``): from now on, the
    child gets SIGKILL when its parent process exits. If ``parent_pid`` (None: do not check,
    as under a fork server, whose children are not ours) is no longer the parent, it exits."""
    if sys.platform.startswith("linux"):
        _follow(ctypes.CDLL(None, use_errno=True).prctl, parent_pid)


def _follow(prctl: Callable[..., int], parent_pid: int | None) -> None:
    prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
    if parent_pid is not None and os.getppid() != parent_pid:  # the parent died before the request took effect
        os._exit(_ORPHANED_STATUS)
