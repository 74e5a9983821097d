"""A small message channel for launcher agents: one server that any number of clients dial.

The server is a ROUTER bound at ``host:port``; each client a DEALER. A message is one frame: a
msgpack map whose values are str, int, float, bool, None, lists and maps. What the maps mean is
the launcher's business (``zgrad.launch.rendezvous``); this module only carries them, checks
their shape, and drops what is not a map (never unpickled, never evaluated).

With CURVE (``[security] curve = true``) the server serves with the agent key pair of
``key_dir`` (``agent.key_secret``, written by ``zgrad-launch keygen``) and admits exactly the
clients holding that pair; without the key files it refuses to start.

Nothing here blocks longer than the timeout it is given, and nothing starts a thread (ZeroMQ's
I/O thread aside): the launcher polls its sockets and its workers' output pipes in one loop
with :class:`ControlPoller`.
"""

from __future__ import annotations

import logging
import os
import socket
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgpack
import zmq
import zmq.auth

from zgrad.errors import ConfigError
from zgrad.transport.security import AGENT_KEY_STEM

__all__ = ["AGENT_KEY_STEM", "AgentKeys", "ControlClient", "ControlPoller", "ControlServer", "load_agent_keys",
           "local_address_towards"]

_MAX_MESSAGE_BYTES = 1 << 20
_MAX_UNSENT = 256
_ZAP_ENDPOINT = "inproc://zeromq.zap.01"
_log = logging.getLogger(__name__)


@dataclass(frozen=True)
class AgentKeys:
    """The CURVE key pair every agent of a job shares (z85-encoded)."""

    public: bytes
    secret: bytes


def load_agent_keys(key_dir: str | os.PathLike) -> AgentKeys:
    """Load ``agent.key_secret`` from ``key_dir``.

    Raises:
        ConfigError: the file is missing or holds no secret key; the message names the fix.
    """
    path = Path(key_dir) / f"{AGENT_KEY_STEM}.key_secret"
    try:
        public, secret = zmq.auth.load_certificate(path)
    except (OSError, ValueError) as exc:
        raise ConfigError(f"cannot load the launcher agents' CURVE key {str(path)!r} ({exc}); create it with "
                          f"`zgrad-launch keygen --out {key_dir} --workers N`") from None
    if secret is None:
        raise ConfigError(f"CURVE key file {str(path)!r} holds no secret key")
    return AgentKeys(public, secret)


def _endpoint(host: str, port: int) -> str:
    return f"tcp://[{host}]:{port}" if ":" in host else f"tcp://{host}:{port}"


def _decode(frame: bytes) -> dict | None:
    try:
        message = msgpack.unpackb(frame, raw=False, strict_map_key=True)
    except (ValueError, msgpack.UnpackException, TypeError):
        return None
    return message if isinstance(message, dict) else None


def _new_socket(context: zmq.Context, kind: int) -> zmq.Socket:
    sock = context.socket(kind)
    sock.setsockopt(zmq.LINGER, 0)
    sock.setsockopt(zmq.MAXMSGSIZE, _MAX_MESSAGE_BYTES)
    sock.setsockopt(zmq.IPV6, 1)
    return sock


class ControlServer:
    """The server end: receives maps from clients, answers each by its client id.

    Args:
        host: address to bind (an address of this machine, or ``0.0.0.0``).
        port: port to bind; 0 picks a free one (see :attr:`port`).
        keys: the agents' CURVE key pair, or None for plain TCP.

    Raises:
        OSError: the address cannot be bound here (``errno`` says why: in use, not local).
    """

    def __init__(self, host: str, port: int, keys: AgentKeys | None = None):
        self._context = zmq.Context(io_threads=1)
        self._zap: zmq.Socket | None = None
        try:
            self.socket = _new_socket(self._context, zmq.ROUTER)
            self.socket.setsockopt(zmq.ROUTER_MANDATORY, 0)
            if keys is not None:
                self._zap = self._context.socket(zmq.REP)
                self._zap.setsockopt(zmq.LINGER, 0)
                self._zap.bind(_ZAP_ENDPOINT)
                self._allowed = keys.public
                self.socket.setsockopt(zmq.CURVE_SERVER, 1)
                self.socket.setsockopt(zmq.CURVE_SECRETKEY, keys.secret)
                self.socket.setsockopt(zmq.ZAP_DOMAIN, b"zgrad-agents")
            self.socket.bind(_endpoint(host, port))
        except zmq.ZMQError as exc:
            self.close()
            raise OSError(exc.errno, f"cannot bind the rendezvous at {host}:{port}: {exc}") from None
        self.port = int(self.socket.getsockopt_string(zmq.LAST_ENDPOINT).rsplit(":", 1)[1])

    def receive(self, timeout_s: float) -> list[tuple[bytes, dict]]:
        """Wait up to ``timeout_s`` for messages; return every one waiting as (client id, map)."""
        received: list[tuple[bytes, dict]] = []
        if timeout_s > 0:
            poller = zmq.Poller()
            for sock in self.sockets():
                poller.register(sock, zmq.POLLIN)
            poller.poll(int(timeout_s * 1000))
        if self._zap is not None:
            self._answer_zap()
        while True:
            try:
                parts = self.socket.recv_multipart(zmq.NOBLOCK)
            except zmq.Again:
                return received
            message = _decode(parts[1]) if len(parts) == 2 else None
            if message is None:
                _log.warning("rendezvous: dropped a malformed message (%d part(s)) from a client", len(parts))
                continue
            received.append((parts[0], message))

    def _answer_zap(self) -> None:
        while self._zap.poll(0, zmq.POLLIN):
            request = self._zap.recv_multipart()
            version, request_id = (request + [b"", b""])[:2]
            admitted = (len(request) >= 7 and request[5] == b"CURVE"
                        and zmq.utils.z85.encode(request[6]) == self._allowed)
            if not admitted:
                _log.warning("rendezvous: refused a client without the agents' CURVE key")
            status = b"200" if admitted else b"400"
            self._zap.send_multipart([version, request_id, status, b"OK" if admitted else b"refused", b"agent", b""])

    def send(self, client: bytes, message: dict[str, Any]) -> None:
        """Send ``message`` to ``client``; a client that has gone is skipped silently."""
        try:
            self.socket.send_multipart([client, msgpack.packb(message, use_bin_type=True)], zmq.NOBLOCK)
        except zmq.Again:
            _log.warning("rendezvous: a client's queue is full; a message to it was dropped")

    def sockets(self) -> list[zmq.Socket]:
        return [self.socket] if self._zap is None else [self.socket, self._zap]

    def close(self) -> None:
        for sock in (getattr(self, "socket", None), self._zap):
            if sock is not None:
                sock.close(0)
        self._context.term()


class ControlClient:
    """The client end: dials the server at ``host:port`` (ZeroMQ reconnects by itself).

    Args:
        host, port: the server's address.
        keys: the agents' CURVE key pair, or None for plain TCP.
    """

    def __init__(self, host: str, port: int, keys: AgentKeys | None = None):
        self._context = zmq.Context(io_threads=1)
        self.socket = _new_socket(self._context, zmq.DEALER)
        if keys is not None:
            self.socket.setsockopt(zmq.CURVE_SERVERKEY, keys.public)
            self.socket.setsockopt(zmq.CURVE_PUBLICKEY, keys.public)
            self.socket.setsockopt(zmq.CURVE_SECRETKEY, keys.secret)
        self.socket.setsockopt(zmq.RECONNECT_IVL, 100)
        self.socket.setsockopt(zmq.RECONNECT_IVL_MAX, 1000)
        self.socket.connect(_endpoint(host, port))
        # Messages the socket could not take yet; the oldest are dropped past the bound (the
        # agents' messages are joins and periodic beats: a newer one says what an old one did).
        self._unsent: deque[bytes] = deque(maxlen=_MAX_UNSENT)

    def send(self, message: dict[str, Any]) -> None:
        """Queue ``message`` for the server (sent once connected). While the socket has no way to
        the server (between reconnects after the server refused a handshake) or its queue is full,
        the message waits here and goes out with a later :meth:`send` or :meth:`receive`; a
        server that never takes it shows as one that does not answer."""
        self._unsent.append(msgpack.packb(message, use_bin_type=True))
        self._flush()

    def _flush(self) -> None:
        while self._unsent:
            try:
                self.socket.send(self._unsent[0], zmq.NOBLOCK)
            except zmq.Again:
                return
            self._unsent.popleft()

    def receive(self, timeout_s: float) -> list[dict]:
        """Wait up to ``timeout_s`` for messages; return every one waiting."""
        self._flush()
        received: list[dict] = []
        if timeout_s > 0 and not self.socket.poll(int(timeout_s * 1000), zmq.POLLIN):
            return received
        while True:
            try:
                frame = self.socket.recv(zmq.NOBLOCK)
            except zmq.Again:
                return received
            message = _decode(frame)
            if message is None:
                _log.warning("rendezvous: dropped a malformed message from the server")
                continue
            received.append(message)

    def close(self) -> None:
        self.socket.close(0)
        self._context.term()


class ControlPoller:
    """Waits for any of some control sockets and plain file descriptors (pipes) to be readable."""

    def __init__(self) -> None:
        self._poller = zmq.Poller()

    def register(self, what: ControlServer | ControlClient | int) -> None:
        for item in self._items(what):
            self._poller.register(item, zmq.POLLIN)

    def unregister(self, what: ControlServer | ControlClient | int) -> None:
        for item in self._items(what):
            self._poller.unregister(item)

    @staticmethod
    def _items(what: ControlServer | ControlClient | int) -> list:
        if isinstance(what, int):
            return [what]
        return what.sockets() if isinstance(what, ControlServer) else [what.socket]

    def poll(self, timeout_s: float) -> set[int]:
        """Wait up to ``timeout_s``; return the file descriptors that are readable (sockets are
        reported as -1: drain them with their ``receive(0)``)."""
        ready: set[int] = set()
        for item, _ in self._poller.poll(max(0, int(timeout_s * 1000))):
            ready.add(item if isinstance(item, int) else -1)
        return ready


def local_address_towards(host: str, port: int) -> str:
    """The address of this machine that packets to ``host`` leave from (how other nodes reach us)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect((host, port or 9))
            return probe.getsockname()[0]
        except OSError:
            return host

