"""``WorkerInfo``: a worker's name and id (its rank); ``WorkerTable``: the job's workers."""

from __future__ import annotations

from typing import NamedTuple, Union

__all__ = ["WorkerInfo", "WorkerTable"]


class WorkerInfo(NamedTuple):
    """A worker of the job: its unique ``name`` and its ``id`` (the rank)."""

    name: str
    id: int

    def __repr__(self) -> str:
        return f"WorkerInfo(id={self.id}, name={self.name})"


class WorkerTable:
    """The workers of the job, by rank and by name; empty until the agent has joined the mesh
    (:meth:`fill`), read-only after."""

    def __init__(self, rank: int) -> None:
        self.rank = rank
        self.infos: list[WorkerInfo] = []
        self._names: dict[str, int] = {}

    def fill(self, infos: list[WorkerInfo]) -> None:
        """Know the job's workers (``infos[rank]`` is the worker of that rank)."""
        self.infos = infos
        self._names = {info.name: info.id for info in infos}

    def resolve(self, to: Union[str, int, WorkerInfo, None] = None) -> WorkerInfo:
        """Resolve a worker name, rank or WorkerInfo (None = this worker).

        Raises:
            TypeError: ``to`` is none of those.
            ValueError: no such worker, listing the known names.
        """
        if to is None:
            return self.infos[self.rank]
        if isinstance(to, WorkerInfo):
            to = to.id
        if isinstance(to, bool) or not isinstance(to, (int, str)):
            raise TypeError(f"a worker is named by a name, a rank or a WorkerInfo, got {type(to).__name__}")
        if isinstance(to, int):
            if 0 <= to < len(self.infos):
                return self.infos[to]
            raise ValueError(f"unknown worker rank {to}; ranks are 0..{len(self.infos) - 1}")
        rank = self._names.get(to)
        if rank is None:
            raise ValueError(f"unknown worker name {to!r}; known workers: {', '.join(self._names)}")
        return self.infos[rank]

    def name_of(self, rank: int) -> str:
        """The name of worker ``rank``, or ``"rank N"`` before the table is known."""
        return self.infos[rank].name if rank < len(self.infos) else f"rank {rank}"
