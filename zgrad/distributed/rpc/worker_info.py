"""``WorkerInfo``: a worker's name and id (its rank)."""

from __future__ import annotations

from typing import NamedTuple

__all__ = ["WorkerInfo"]


class WorkerInfo(NamedTuple):
    """A worker of the job: its unique ``name`` and its ``id`` (the rank)."""

    name: str
    id: int

    def __repr__(self) -> str:
        return f"WorkerInfo(id={self.id}, name={self.name})"
