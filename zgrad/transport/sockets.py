"""Creating and closing the ZeroMQ sockets of one mesh, with the options every one of them needs.

Every socket gets LINGER 0 (close never waits for unsent data), a bounded high-water mark
and a bounded handshake; the inbound socket also caps the size of any one frame.

The wake-up of the I/O thread arrives on the inbound ROUTER itself: besides its endpoint, the
ROUTER binds a private inproc address where a DEALER with a random routing id (the wake id)
connects. The I/O thread then polls a single socket (two with CURVE: the ZAP handler), which
keeps each turn to a couple of system calls.
"""

from __future__ import annotations

import os
import socket
import uuid
from dataclasses import dataclass, field

import zmq

from zgrad.config import TransportConfig
from zgrad.errors import TransportError
from zgrad.transport.security import ZAP_DOMAIN, ZAP_ENDPOINT, CurveKeys

__all__ = ["MeshSockets", "open_sockets", "open_dealer", "send_frames", "MONITORED_EVENTS", "WAKE_ID_PREFIX"]

MONITORED_EVENTS = (
    zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL | zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL | zmq.EVENT_HANDSHAKE_FAILED_AUTH
)
_MIB = 1 << 20
# Wake ids never look like a worker's routing id (those start with b"zgid").
WAKE_ID_PREFIX = b"wake"
# Frames at least this big go out zero-copy; smaller ones are cheaper to copy.
_ZERO_COPY_MIN = 65536
_MORE = int(zmq.NOBLOCK | zmq.SNDMORE)
_LAST = int(zmq.NOBLOCK)


def send_frames(sock: zmq.Socket, frames: list, copy_all: bool) -> None:
    """Send ``frames`` (one message, or its rest after a ROUTER's routing-id part) without
    blocking: frames of 64 KiB and more zero-copy unless ``copy_all`` (a transport whose
    zero-copy frames would alias the sender's memory in the receiver).

    Raises:
        zmq.Again: the socket is full. Only the first part can be refused: once it is accepted,
            ZeroMQ accepts the rest of the message (the high-water mark counts whole messages).
    """
    last = len(frames) - 1
    for i, frame in enumerate(frames):
        size = len(frame)
        if size >= _ZERO_COPY_MIN and not copy_all:
            # A whole received frame going out again (an echo, a forward) is sent as the
            # frame itself: ZeroMQ shares its reference-counted data, with no release
            # round-trip through pyzmq's garbage-collector thread.
            owner = getattr(frame, "obj", None)
            if isinstance(owner, zmq.Frame) and len(owner) == size:
                frame = owner
        sock.send(frame, _MORE if i < last else _LAST, copy=copy_all or size < _ZERO_COPY_MIN)


@dataclass
class MeshSockets:
    """The sockets a mesh creates before its I/O thread starts (then owned by that thread).

    Attributes:
        context: the ZeroMQ context (from the transport).
        inbound: ROUTER bound at ``bound_endpoint``; every peer's DEALER connects to it.
        monitor: PAIR receiving the inbound socket's handshake-failure events.
        wake_tx: DEALER other threads poke (under the outbox lock); its messages reach
            ``inbound`` with routing id ``wake_id``.
        wake_id: the wake DEALER's routing id.
        zap: REP answering ZAP requests, when CURVE is on.
        bound_endpoint: what the inbound socket is bound at (``LAST_ENDPOINT``).
        dealers: the outbound DEALER to each peer, by rank (opened by the I/O thread).
        stream_listener: the stream socket peers' links and caller-direct requests come to (``streams.py``), or None.
        stream_address: the address peers dial to reach it (``tcp://host:port``, ``ipc://path``), or "".
    """

    context: zmq.Context
    inbound: zmq.Socket
    monitor: zmq.Socket
    wake_tx: zmq.Socket
    wake_id: bytes
    zap: zmq.Socket | None
    bound_endpoint: str
    dealers: dict[int, zmq.Socket] = field(default_factory=dict)
    stream_listener: socket.socket | None = None
    stream_address: str = ""

    def close(self) -> None:
        """Close every socket with LINGER 0 (dealers included). Call on the owning thread."""
        for sock in self.dealers.values():
            sock.close(linger=0)
        self.dealers.clear()
        if self.stream_listener is not None:
            self.stream_listener.close()
            self.stream_listener = None
            if self.stream_address.startswith("ipc://"):
                try:
                    os.unlink(self.stream_address[6:])
                except OSError:
                    pass
        self.inbound.disable_monitor()
        for sock in (self.monitor, self.inbound, self.wake_tx, self.zap):
            if sock is not None:
                sock.close(linger=0)


def _socket(context: zmq.Context, kind: int, created: list) -> zmq.Socket:
    sock = context.socket(kind)
    sock.linger = 0
    created.append(sock)
    return sock


def open_sockets(
    context: zmq.Context, bind_endpoint: str, t: TransportConfig, keys: CurveKeys | None, worker: str
) -> MeshSockets:
    """Create the ZAP handler (CURVE), the bound inbound socket, its monitor and the wake DEALER.

    Raises:
        TransportError: binding failed; the message names the endpoint and the ZeroMQ error.
    """
    created: list[zmq.Socket] = []
    token = uuid.uuid4().hex
    try:
        zap = None
        if keys is not None:
            zap = _socket(context, zmq.REP, created)
            zap.bind(ZAP_ENDPOINT)
        inbound = _socket(context, zmq.ROUTER, created)
        inbound.rcvhwm = t.high_water_mark
        inbound.maxmsgsize = t.max_message_mb * _MIB
        inbound.handshake_ivl = int(t.connect_timeout_s * 1000)
        if keys is not None:
            inbound.curve_server = True
            inbound.curve_publickey = keys.public
            inbound.curve_secretkey = keys.secret
            inbound.zap_domain = ZAP_DOMAIN
        monitor = inbound.get_monitor_socket(MONITORED_EVENTS, addr=f"inproc://zgrad-monitor-{token}")
        monitor.linger = 0
        created.append(monitor)
        inbound.bind(bind_endpoint)
        bound = inbound.last_endpoint.decode()
        inbound.bind(f"inproc://zgrad-wake-{token}")
        wake_id = WAKE_ID_PREFIX + uuid.uuid4().bytes
        wake_tx = _socket(context, zmq.DEALER, created)
        wake_tx.routing_id = wake_id
        wake_tx.connect(f"inproc://zgrad-wake-{token}")
    except zmq.ZMQError as exc:
        for sock in reversed(created):
            sock.close(linger=0)
        raise TransportError(
            f"worker {worker!r} cannot bind its inbound socket at {bind_endpoint}: {exc}; choose another "
            "port/path in [[workers]] or [transport], or stop the process that holds it"
        ) from exc
    return MeshSockets(context, inbound, monitor, wake_tx, wake_id, zap, bound)


def open_dealer(
    context: zmq.Context, endpoint: str, routing_id: bytes, t: TransportConfig, keys: CurveKeys | None, peer_key: bytes | None
) -> zmq.Socket:
    """Create the outbound DEALER to one peer and start connecting (ZeroMQ connects in the background).

    Raises:
        TransportError: the endpoint is malformed.
    """
    sock = context.socket(zmq.DEALER)
    sock.linger = 0
    sock.sndhwm = t.high_water_mark
    sock.routing_id = routing_id
    sock.handshake_ivl = int(t.connect_timeout_s * 1000)
    if keys is not None:
        sock.curve_publickey = keys.public
        sock.curve_secretkey = keys.secret
        sock.curve_serverkey = peer_key
    try:
        sock.connect(endpoint)
    except zmq.ZMQError as exc:
        sock.close(linger=0)
        raise TransportError(f"cannot connect to peer endpoint {endpoint!r}: {exc}") from exc
    return sock
