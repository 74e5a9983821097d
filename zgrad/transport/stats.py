"""Counters of one mesh, and logging that says each problem once per peer and reason."""

from __future__ import annotations

import logging

__all__ = ["TransportStats"]

# Distinct (peer, reason) pairs remembered for log-once; beyond this, new pairs are counted
# but not logged (a fuzzing peer must not grow memory or flood the log).
_MAX_LOGGED = 1024


class TransportStats:
    """Counters written by the mesh's I/O thread and read from any thread.

    Only the I/O thread writes; :meth:`snapshot` copies the plain dicts with ``dict()``, a
    single C-level step that a writer cannot interleave with under the GIL, so readers need no
    lock.

    Args:
        worker: the worker's name, for log lines.
        logger: where the log-once warnings go.
    """

    def __init__(self, worker: str, logger: logging.Logger):
        self._worker = worker
        self._log = logger
        self.counters: dict[str, int] = {}
        self.rejected: dict[str, int] = {}
        self._logged: set[tuple[str, str]] = set()

    def add(self, key: str, n: int = 1) -> None:
        """Add ``n`` to counter ``key``."""
        if n:
            self.counters[key] = self.counters.get(key, 0) + n

    def add_message(self, count_key: str, bytes_key: str, nbytes: int) -> None:
        """Count one message under ``count_key`` and its ``nbytes`` under ``bytes_key`` (the hot path's one call)."""
        counters = self.counters
        counters[count_key] = counters.get(count_key, 0) + 1
        if nbytes:
            counters[bytes_key] = counters.get(bytes_key, 0) + nbytes

    def warn_once(self, peer: str, reason: str, detail: str) -> None:
        """Log ``detail`` at WARNING the first time ``(peer, reason)`` is seen."""
        key = (peer, reason)
        if key in self._logged:
            return
        if len(self._logged) < _MAX_LOGGED:
            self._logged.add(key)
            self._log.warning("worker %r: %s from %s: %s (further ones are counted, not logged)", self._worker, reason, peer, detail)
        elif len(self._logged) == _MAX_LOGGED:
            self._logged.add(("*", "*"))
            self._log.warning("worker %r: too many distinct bad inputs; no longer logging new ones", self._worker)

    def reject(self, peer: str, reason: str, detail: str) -> None:
        """Count a dropped inbound message under ``reason`` and log it once per peer and reason."""
        self.rejected[reason] = self.rejected.get(reason, 0) + 1
        self.warn_once(peer, reason, detail + "; message dropped")

    def snapshot(self) -> dict:
        """Return ``{counter: n, ..., "rejected": {reason: n}, "rejected_total": n}``."""
        out: dict = dict(self.counters)
        rejected = dict(self.rejected)
        out["rejected"] = rejected
        out["rejected_total"] = sum(rejected.values())
        return out
