"""The broker-less ZeroMQ mesh: frames, transports, rendezvous, liveness, CURVE.

See ``docs/transport.md`` for the wire format and the mesh's rules.
"""

from zgrad.transport.base import EndpointRequest, Transport
from zgrad.transport.builtin import InprocTransport, IpcTransport, TcpTransport
from zgrad.transport.cma import RemoteRead
from zgrad.transport.envelope import Envelope, WorkerEntry
from zgrad.transport.frames import MAX_USER_KIND, PROTOCOL_VERSION, RESERVED_KINDS
from zgrad.transport.create import create_mesh
from zgrad.transport.mesh import Mesh
from zgrad.transport.registry import (
    ENTRY_POINT_GROUP,
    TransportRegistry,
    available_transports,
    default_registry,
    get_transport,
)
from zgrad.transport.security import generate_keys, key_files

__all__ = [
    "ENTRY_POINT_GROUP",
    "MAX_USER_KIND",
    "PROTOCOL_VERSION",
    "RESERVED_KINDS",
    "EndpointRequest",
    "Envelope",
    "InprocTransport",
    "IpcTransport",
    "Mesh",
    "RemoteRead",
    "TcpTransport",
    "Transport",
    "TransportRegistry",
    "WorkerEntry",
    "available_transports",
    "create_mesh",
    "default_registry",
    "generate_keys",
    "get_transport",
    "key_files",
]
