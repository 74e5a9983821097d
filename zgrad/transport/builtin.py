"""The built-in transports: ``tcp`` (hosts), ``ipc`` (Unix sockets, one host), ``inproc`` (threads)."""

from __future__ import annotations

import os
import re
import tempfile
import threading

import zmq

from zgrad.errors import ConfigError
from zgrad.transport.base import EndpointRequest, Transport

__all__ = ["TcpTransport", "IpcTransport", "InprocTransport"]

_WILDCARDS = {"*", "0.0.0.0", "::", "[::]", ""}
# sun_path is 108 bytes on Linux, including the terminating NUL.
_MAX_IPC_PATH = 107


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", name) or "job"


class TcpTransport(Transport):
    """TCP between hosts (or on loopback).

    Binds ``tcp://<transport.bind_address>:<port>`` where port is ``master_port`` for rank 0 in
    torchrun-style rendezvous, else the worker's ``[[workers]] port`` (``0``: any free port).
    Peers dial the worker's ``[[workers]] host``, else ``transport.advertise_address``, else the
    bind address. Rank 0 is found at ``master_addr:master_port`` or at ``workers[0]``.
    """

    name = "tcp"

    def bind_endpoint(self, request: EndpointRequest) -> str:
        spec = request.spec
        if request.rank == 0 and request.master_port is not None:
            port = request.master_port
        else:
            port = spec.port if spec is not None else 0
        return f"tcp://{request.config.transport.bind_address}:{port}"

    def advertised_endpoint(self, request: EndpointRequest, bound_endpoint: str) -> str:
        port = bound_endpoint.rsplit(":", 1)[1]
        t = request.config.transport
        spec = request.spec
        if request.rank == 0 and request.master_addr:
            host = request.master_addr
        elif spec is not None:
            host = spec.host
        else:
            host = t.advertise_address or t.bind_address
        if host in _WILDCARDS:
            raise ConfigError(
                f"worker {request.name!r} binds the wildcard address {t.bind_address!r}, which peers cannot dial: "
                "set 'transport.advertise_address' (or this worker's [[workers]] host) to an address they can reach"
            )
        return f"tcp://{host}:{port}"

    def rank0_endpoint(self, request: EndpointRequest) -> str | None:
        if request.master_addr and request.master_port:
            return f"tcp://{request.master_addr}:{request.master_port}"
        workers = request.config.workers
        if workers and workers[0].port:
            return f"tcp://{workers[0].host}:{workers[0].port}"
        return None


class IpcTransport(Transport):
    """Unix domain sockets on one host: ``ipc://<ipc_dir>/<job>-<rank>.sock``.

    ``transport.ipc_dir`` defaults to ``<tmp>/zgrad-ipc-<uid>`` (not ``<tmp>/zgrad``: a folder of
    that name would shadow the package for scripts run from ``<tmp>``). Every endpoint follows from the job name
    and the rank, so rank 0 needs no address; two jobs sharing a name and a directory collide.
    The socket file is removed when the mesh closes.
    """

    name = "ipc"

    def _path(self, request: EndpointRequest, rank: int) -> str:
        directory = request.config.transport.ipc_dir or os.path.join(tempfile.gettempdir(), f"zgrad-ipc-{os.getuid()}")
        os.makedirs(directory, mode=0o700, exist_ok=True)
        path = os.path.join(directory, f"{_safe(request.config.job.name)}-{rank}.sock")
        if len(path.encode()) > _MAX_IPC_PATH:
            raise ConfigError(
                f"ipc socket path {path!r} is {len(path.encode())} bytes; Unix sockets allow {_MAX_IPC_PATH}: "
                "set 'transport.ipc_dir' to a shorter directory or shorten 'job.name'"
            )
        return path

    def bind_endpoint(self, request: EndpointRequest) -> str:
        return "ipc://" + self._path(request, request.rank)

    def rank0_endpoint(self, request: EndpointRequest) -> str | None:
        return "ipc://" + self._path(request, 0)

    def cleanup(self, bound_endpoint: str) -> None:
        try:
            os.unlink(bound_endpoint.removeprefix("ipc://"))
        except FileNotFoundError:
            pass


class InprocTransport(Transport):
    """All workers as threads of one process: ``inproc://zgrad/<job>/<rank>``.

    Every mesh of the process shares one ZeroMQ context (inproc endpoints are visible only
    within a context). This instance owns it: created on first use, terminated when the last
    mesh using it gives it back. CURVE is not available (nothing leaves the process), and
    buffers are copied on send because a zero-copy frame would alias the sender's memory.
    """

    name = "inproc"
    supports_curve = False
    shares_memory = True

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._context: zmq.Context | None = None
        self._users = 0

    def acquire_context(self) -> zmq.Context:
        with self._lock:
            if self._context is None:
                self._context = zmq.Context()
            self._users += 1
            return self._context

    def release_context(self, context: zmq.Context) -> None:
        with self._lock:
            self._users -= 1
            if self._users == 0 and self._context is context:
                self._context = None
                context.term()

    def bind_endpoint(self, request: EndpointRequest) -> str:
        return f"inproc://zgrad/{_safe(request.config.job.name)}/{request.rank}"

    def rank0_endpoint(self, request: EndpointRequest) -> str | None:
        return f"inproc://zgrad/{_safe(request.config.job.name)}/0"
