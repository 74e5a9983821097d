"""``ProcessGroup`` (a set of ranks running collectives together) and ``World`` (one
``init_process_group``: the mesh, the default group, the groups made by ``new_group``).

Running a collective: :meth:`ProcessGroup.run` gives it the group's next sequence number and
runs it, on the caller's thread when the group is idle and the call is synchronous, else on the
group's thread (``executor.py``). It begins at its sequence number (``group_state.py``), talks
through a :class:`~zgrad.distributed.collectives.channel.Channel`, and ends; a failure fails the
group everywhere (``MeshComm.fail_group``).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any

from zgrad.distributed.collectives.channel import Channel
from zgrad.distributed.collectives.comm import MeshComm
from zgrad.distributed.collectives.env import PgPlan
from zgrad.distributed.collectives.executor import GroupExecutor
from zgrad.distributed.collectives.fingerprint import Fingerprint
from zgrad.distributed.collectives.group_state import GroupState
from zgrad.distributed.collectives.state import bind_thread
from zgrad.distributed.collectives.work import Work
from zgrad.errors import CollectiveError

__all__ = ["ProcessGroup", "World", "NON_GROUP_MEMBER"]

NON_GROUP_MEMBER = -100  # what new_group returns to ranks outside the group (PyTorch's GroupMember value)

Algorithm = Callable[[Channel], None]


class ProcessGroup:
    """A group of ranks that run collectives together (``torch.distributed.ProcessGroup``).

    Made by ``init_process_group`` (the default group, ``group.WORLD``) and ``new_group``.
    ``rank()`` is this process's rank within the group, ``size()`` the number of members.
    """

    def __init__(self, world: "World", state: GroupState) -> None:
        self.world = world
        self.state = state
        self._executor = GroupExecutor(f"zgrad-pg-{world.comm.name}-{state.name.replace(' ', '')}",
                                       on_thread_start=lambda: bind_thread(world))

    def rank(self) -> int:
        """This process's rank in the group."""
        return self.state.rank

    def size(self) -> int:
        """Number of ranks in the group."""
        return self.state.size

    @property
    def ranks(self) -> tuple[int, ...]:
        """The members' global ranks; group rank ``i`` is ``ranks[i]``."""
        return self.state.ranks

    @property
    def group_name(self) -> str:
        return self.state.name

    def run(self, fingerprint: Fingerprint, algorithm: Algorithm, result: list[Any], async_op: bool,
            timeout_s: float | None = None) -> Work | None:
        """Issue one collective: ``algorithm(channel)`` at the group's next sequence number.

        Args:
            fingerprint: what this rank calls (checked against every message of the collective).
            algorithm: does the collective's sends, receives and reductions.
            result: the tensors the collective writes (the value of the Work's future).
            async_op: return a :class:`Work` at once; else block until done here.
            timeout_s: how long the collective may take (default: the group's timeout).

        Returns:
            The Work with ``async_op``, else None.

        Raises:
            (synchronous) CollectiveError, ZgradTimeoutError, WorkerUnavailableError: the
            collective failed; the group is unusable afterwards.
        """
        timeout_s = self.world.timeout_s if timeout_s is None else timeout_s
        queued: list[Work] = []

        def make_job(seq: int) -> Callable[[], None]:  # only for a collective that waits its turn
            work = Work(f"{fingerprint.collective} on group {self.state.name}", result)
            queued.append(work)
            return lambda: work._finish(self._execute(seq, fingerprint, algorithm, timeout_s))

        seq = self._executor.issue(make_job, inline=not async_op)
        if seq is None:
            if async_op:
                return queued[0]
            queued[0].wait()  # behind other collectives of the group: its turn comes on the group's thread
            return None
        try:  # the latency path: the group is idle, this thread runs it now
            error = self._execute(seq, fingerprint, algorithm, timeout_s)
        finally:
            self._executor.done_inline()
        if error is not None:
            try:
                raise error
            finally:
                del error  # else this frame and the error's traceback would hold each other
        return None

    def _execute(self, seq: int, fingerprint: Fingerprint, algorithm: Algorithm, timeout_s: float) -> BaseException | None:
        state, comm = self.state, self.world.comm
        try:
            inbox = state.begin(seq)
        except BaseException as exc:  # noqa: BLE001 - the group failed before: this one fails with it
            return exc
        channel = Channel(comm.send, state, seq, fingerprint, inbox, timeout_s,
                          lambda reason, src: comm.reject(src, reason, f"in {fingerprint.describe(seq)}"))
        try:
            algorithm(channel)
        except BaseException as exc:  # noqa: BLE001 - the collective's error, handed to its caller
            comm.fail_group(state, seq, exc)
            return state.failure or exc  # the first failure is the cause (an ABORT before a failed send)
        finally:
            state.end(seq, fingerprint)
        return None

    def close(self) -> None:
        """Stop the group's thread (what is queued runs first; bounded)."""
        self._executor.close()

    def __repr__(self) -> str:
        return f"<ProcessGroup {self.state.name} ranks={list(self.state.ranks)} rank={self.state.rank}>"


class World:
    """One ``init_process_group`` on this rank: the mesh, the default group and the others.

    Args:
        plan: rank, world size, configs and rendezvous (``env.py``).
        backend: the backend name it was asked for (every one runs over the mesh).
    """

    def __init__(self, plan: PgPlan, backend: str = "zmq") -> None:
        self.plan = plan
        self.backend = backend
        self.rank = plan.rank
        self.world_size = plan.world_size
        self.timeout_s = plan.timeout_s
        self.config = plan.config
        self.destroyed = False
        self._lock = threading.Lock()
        self.comm = MeshComm(plan.mesh_config, plan.rank, plan.world_size, plan.name, plan.master_addr, plan.master_port)
        self._next_group_id = 1
        self.groups: dict[int, ProcessGroup] = {}
        self.default = self._make_group(0, tuple(range(plan.world_size)), "WORLD")

    def _make_group(self, group_id: int, ranks: tuple[int, ...], name: str) -> ProcessGroup:
        group = ProcessGroup(self, self.comm.add_group(group_id, ranks, name))
        with self._lock:
            self.groups[group_id] = group
        return group

    def start(self) -> None:
        """Join the mesh; blocks until every rank has (at most ``[transport] connect_timeout_s``)."""
        self.comm.mesh.start()

    def new_group(self, ranks: Sequence[int] | None) -> "ProcessGroup | int":
        """The group of ``ranks`` (every rank of the world must call this, in the same order);
        :data:`NON_GROUP_MEMBER` on ranks outside it.

        Raises:
            ValueError: a rank out of range or repeated.
        """
        members = tuple(range(self.world_size)) if ranks is None else tuple(sorted(int(r) for r in ranks))
        bad = [r for r in members if not 0 <= r < self.world_size]
        if bad or len(set(members)) != len(members) or not members:
            raise ValueError(f"new_group: ranks must be distinct and in 0..{self.world_size - 1}, got {list(ranks or [])}")
        with self._lock:
            group_id = self._next_group_id
            self._next_group_id += 1
        if self.rank not in members:
            return NON_GROUP_MEMBER
        return self._make_group(group_id, members, f"group {group_id}")

    def destroy_group(self, group: ProcessGroup) -> None:
        group.state.fail(CollectiveError(f"group {group.state.name} was destroyed"))  # wakes what still runs
        group.close()
        with self._lock:
            self.groups.pop(group.state.id, None)
        self.comm.remove_group(group.state.id)

    def destroy(self) -> None:
        """Stop every group's thread and close the mesh (graceful: sent messages are delivered)."""
        if self.destroyed:
            return
        self.destroyed = True
        with self._lock:
            groups = list(self.groups.values())
        for group in groups:  # a collective still running ends now; unread buffers are let go
            group.state.fail(CollectiveError("the process group was destroyed on this rank"))
            group.close()
        self.comm.mesh.close()
