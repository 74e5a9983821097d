"""Workers die with their launcher, even when it is killed with SIGKILL and cannot stop them.

On Linux each worker asks the kernel, between fork and exec, for SIGKILL when its parent exits
(``prctl(PR_SET_PDEATHSIG)``, which survives exec). SIGKILL rather than SIGTERM: a worker that
ignores SIGTERM (as a stuck one may) must not outlive the job, and a launcher that was killed can
no longer apply its grace period. Elsewhere nothing is set up and :func:`die_with_parent`
returns None.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
from collections.abc import Callable

__all__ = ["die_with_parent"]

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
        prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
        if os.getppid() != parent:  # the launcher died before the request took effect
            os._exit(_ORPHANED_STATUS)

    return preexec
