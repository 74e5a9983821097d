"""The process group's own mesh and what arrives on it: checked, then routed to its group.

The mesh's I/O thread calls :meth:`MeshComm._on_message`, which only checks and routes (cheap,
never blocks): DATA goes to its group's running collective or stash (``group_state.py``), ABORT
fails its group and is passed on to the group's other members (once: a group fails once). A group this rank has not created yet (another rank called ``new_group``
sooner) keeps its messages until it is created. A lost peer fails every group it belongs to,
which wakes their running collectives at once; a peer that closed its mesh only fails the
collectives that still wait for it.
"""

from __future__ import annotations

import logging
import threading
from collections import Counter
from collections.abc import Sequence
from typing import Any

from zgrad.config import Config
from zgrad.distributed.collectives.group_state import MAX_STASHED, GroupState, Inbound
from zgrad.distributed.collectives.messages import KIND_ABORT, KIND_DATA, VALID_KINDS, check_abort, check_data
from zgrad.errors import CollectiveError, ProtocolError, WorkerUnavailableError
from zgrad.transport import Envelope, create_mesh

__all__ = ["MeshComm"]

log = logging.getLogger("zgrad.collectives")

# What the mesh's on_peer_lost reason says when the peer closed its mesh (docs/transport.md).
GOODBYE_REASON = "closed its mesh"


class MeshComm:
    """One rank's end of a process group's mesh: its groups and their inbound traffic.

    Args:
        config: the mesh's config (see ``env.py``: the job's, with the process group's endpoints).
        rank: this process's rank; world_size: number of ranks; name: this rank's name.
        master_addr, master_port: where rank 0 of the process group listens (tcp).
    """

    def __init__(self, config: Config, rank: int, world_size: int, name: str, master_addr: str | None,
                 master_port: int | None) -> None:
        self.rank = rank
        self.world_size = world_size
        self.name = name
        self._lock = threading.Lock()
        self._groups: dict[int, GroupState] = {}
        self._early: dict[int, list[tuple[Envelope, Any]]] = {}
        self._early_count = 0
        self._lost: dict[int, str] = {}
        self._fingerprints: dict = {}  # checked ones, for check_data (the I/O thread's)
        self.sent = 0  # DATA messages (counted by the sending thread, when it hands them to the mesh)
        self.received: Counter[int] = Counter()
        self.rejected: Counter[str] = Counter()
        self._logged: set[tuple[int, str]] = set()
        self.mesh = create_mesh(config, rank, world_size, name, on_message=self._on_message,
                                on_peer_lost=self._on_peer_lost, valid_kinds=VALID_KINDS,
                                master_addr=master_addr, master_port=master_port, defer_cma_reads=True)

    # --- groups ---------------------------------------------------------------------------------

    def add_group(self, group_id: int, ranks: tuple[int, ...], name: str) -> GroupState:
        """Create this rank's state of a group it belongs to; hand it what arrived early."""
        state = GroupState(group_id, ranks, self.rank, name)
        with self._lock:
            self._groups[group_id] = state
            early = self._early.pop(group_id, [])
            self._early_count -= len(early)
            lost = {r: why for r, why in self._lost.items() if r in ranks}
        for rank, why in lost.items():
            state.fail(self._unavailable(state, rank, why))
        for envelope, parsed in early:
            self._route(state, envelope, parsed)
        return state

    def remove_group(self, group_id: int) -> None:
        with self._lock:
            self._groups.pop(group_id, None)

    def fail_group(self, group: GroupState, seq: int, error: BaseException) -> None:
        """This rank failed collective ``seq`` of ``group``: fail the group here and tell its
        other members (ABORT), so none of them waits for the rest of it."""
        if not group.fail(error):
            return
        meta = {"group": group.id, "seq": seq, "error": f"{type(error).__name__}: {error}"}
        for rank in group.ranks:
            if rank != self.rank and self.mesh.is_alive(rank):
                try:
                    self.mesh.send(rank, KIND_ABORT, 0, meta)
                except Exception:  # noqa: BLE001 - it is gone or closing; nothing more to tell it
                    log.debug("rank %d: could not send ABORT to rank %d", self.rank, rank)

    def send(self, rank: int, meta: list, buffers: Sequence[Any]) -> None:
        """One DATA message to global ``rank`` (see ``Channel``)."""
        self.mesh.send(rank, KIND_DATA, 0, meta, buffers)
        self.sent += 1

    # --- inbound (the mesh's I/O thread) ---------------------------------------------------------

    def _on_message(self, envelope: Envelope) -> None:
        try:
            parsed = check_data(envelope.meta, len(envelope.buffers), self._fingerprints) \
                if envelope.kind == KIND_DATA else check_abort(envelope.meta)
        except ProtocolError as exc:
            self.reject(envelope.src, "bad_metadata", str(exc))
            return
        group_id = parsed[0]
        with self._lock:
            state = self._groups.get(group_id)
            if state is None and self._early_count < MAX_STASHED:
                self._early.setdefault(group_id, []).append((envelope, parsed))
                self._early_count += 1
                return
        if state is None:
            self.reject(envelope.src, "stash_full", f"messages for group {group_id}, which this rank has not created")
            return
        self._route(state, envelope, parsed)

    def _route(self, state: GroupState, envelope: Envelope, parsed: Any) -> None:
        src = state.group_rank_of.get(envelope.src)
        if src is None:
            self.reject(envelope.src, "not_a_member", f"a message for group {state.name}, of which rank {envelope.src} is no member")
            return
        self.received[envelope.kind] += 1
        if envelope.kind == KIND_ABORT:
            _, seq, error = parsed
            # Passed on to the other members: this rank may be the one another member waits for,
            # and its goodbye must not reach that member before the reason it stopped does (the
            # ABORT from the first rank travels another connection, with no order to this one's).
            self.fail_group(state, seq, CollectiveError(
                f"collective {seq} of group {state.name} failed on rank {envelope.src}: {error}"))
            return
        outcome = state.deliver(parsed.seq, Inbound(src, parsed.tag, parsed.fingerprint, envelope.buffers))
        if outcome is None:
            return
        if isinstance(outcome, str):
            self.rejected[outcome] += 1
            return
        self.fail_group(state, parsed.seq, outcome)  # a late message showed the ranks disagreed

    def _on_peer_lost(self, rank: int, reason: str) -> None:
        departed = GOODBYE_REASON in reason  # it closed its mesh after everything it sent arrived
        with self._lock:
            if not departed:
                self._lost[rank] = reason
            groups = [g for g in self._groups.values() if rank in g.group_rank_of]
        for group in groups:
            if departed:
                group.depart(rank, reason)
            else:
                group.fail(self._unavailable(group, rank, reason))

    def _unavailable(self, group: GroupState, rank: int, reason: str) -> WorkerUnavailableError:
        return WorkerUnavailableError(f"rank {rank} of group {group.name} is unavailable: {reason}; its collectives "
                                      "cannot complete (destroy the process group and start again)")

    def reject(self, src: int, reason: str, detail: str) -> None:
        """Count (and log once per peer and reason) a dropped message."""
        self.rejected[reason] += 1
        if (src, reason) not in self._logged and len(self._logged) < 1024:
            self._logged.add((src, reason))
            log.warning("process group rank %d dropped a message from rank %d (%s): %s", self.rank, src, reason, detail)

    def debug_info(self) -> dict[str, Any]:
        with self._lock:
            groups = {g.name: g.describe() for g in self._groups.values()}
        return {"rank": self.rank, "groups": groups, "sent": self.sent, "received": dict(self.received),
                "rejected": dict(self.rejected), "lost": dict(self._lost), "transport": self.mesh.stats()}
