"""The ``Transport`` plugin interface: how a kind of endpoint is bound, dialled and cleaned up.

A transport does not move messages itself — every transport is a ZeroMQ endpoint scheme, and
the mesh does the moving. A transport decides where a worker binds, what address peers dial,
where rank 0 (the rendezvous point) is found, which ZeroMQ context to use, and what to clean up.
Third parties publish a subclass under the entry-point group ``zgrad.transports``.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass
from typing import ClassVar

import zmq

from zgrad.config import Config, WorkerSpec

__all__ = ["EndpointRequest", "Transport"]


@dataclass(frozen=True)
class EndpointRequest:
    """What a transport needs to know to place one worker.

    Attributes:
        config: the job configuration.
        rank: the worker's rank.
        name: the worker's name.
        master_addr: host of rank 0 for torchrun-style rendezvous, or ``None``.
        master_port: port of rank 0 for torchrun-style rendezvous, or ``None``.
    """

    config: Config
    rank: int
    name: str
    master_addr: str | None = None
    master_port: int | None = None

    @property
    def spec(self) -> WorkerSpec | None:
        """This worker's ``[[workers]]`` entry (by rank), or ``None`` if the config lists none."""
        workers = self.config.workers
        return workers[self.rank] if self.rank < len(workers) else None


class Transport(abc.ABC):
    """A kind of ZeroMQ endpoint the mesh can run over.

    Subclasses set :attr:`name` and implement :meth:`bind_endpoint` and :meth:`rank0_endpoint`.
    One instance per name lives in the registry for the whole process and may be used by several
    meshes at once, so methods must be thread-safe.

    Attributes:
        name: the ``[transport] kind`` value that selects this transport.
        supports_curve: whether ``[security] curve = true`` can be used over it.
        shares_memory: whether a zero-copy frame would alias the sender's memory in the receiver
            (true for inproc); the mesh then copies buffers on send to keep value semantics.
    """

    name: ClassVar[str] = ""
    supports_curve: ClassVar[bool] = True
    shares_memory: ClassVar[bool] = False

    def acquire_context(self) -> zmq.Context:
        """Return the ZeroMQ context a new mesh should use; pair with :meth:`release_context`.

        The default gives each mesh its own context.
        """
        return zmq.Context()

    def release_context(self, context: zmq.Context) -> None:
        """Give back a context from :meth:`acquire_context` once every socket on it is closed."""
        context.term()

    @abc.abstractmethod
    def bind_endpoint(self, request: EndpointRequest) -> str:
        """Return the endpoint this worker binds its inbound socket at (tcp port 0 = any free one).

        Raises:
            ConfigError: the config does not allow a usable endpoint.
        """

    def advertised_endpoint(self, request: EndpointRequest, bound_endpoint: str) -> str:
        """Return the endpoint peers dial, given the one actually bound (``LAST_ENDPOINT``).

        Raises:
            ConfigError: the bound address cannot be dialled by peers and the config gives no other.
        """
        return bound_endpoint

    @abc.abstractmethod
    def rank0_endpoint(self, request: EndpointRequest) -> str | None:
        """Return the endpoint where rank 0 can be reached, or ``None`` if it cannot be known."""

    def cleanup(self, bound_endpoint: str) -> None:
        """Remove what binding left behind (e.g. an ipc socket file). Called after the socket closed."""
