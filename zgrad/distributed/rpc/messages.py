"""RPC message kinds and the metadata schema of each, checked before any message is acted on.

Every message is one transport envelope: ``kind``, ``request_id``, a msgpack ``meta`` map (schema
below) and raw buffers (tensor data referenced from ``payload``, see ``codec.py``).

======================  ============================================================  ==========
kind                    meta                                                          reply
======================  ============================================================  ==========
CALL                    target "mod:qualname", payload, timeout_s, [rref, fork],       RESULT or
                        [context] (distributed autograd context id), [grad_msg]        ERROR
                        (autograd_message_id of the tensors requiring grad)
RESULT                  payload, [grad_msg]                                           -
ERROR                   type, message, worker, traceback                              -
RREF_FETCH              rref, [context]                                               RESULT or
                                                                                      ERROR
RREF_FORK               rref, fork (a new user reference exists)                      -
RREF_DELETE             rref, fork (that user reference is gone)                      -
SHUTDOWN_READY          - (to rank 0: no call of mine is in flight)                   -
SHUTDOWN_GO             dead (names of workers that died before the barrier)          -
GRAD, GRAD_ACK,         owned by distributed autograd: meta is ``body`` (kinds,         -
DISCOVER, DISCOVER_ACK, records and schemas in ``zgrad/engine/dist/protocol.py``) and
START, PASS_END(_ACK),  ``arrays`` ([dtype, shape] of each gradient buffer, or the index
FAILURE(_ACK),          of a buffer sent already; ``zgrad/distributed/autograd/messenger.py``)
CONTEXT_RELEASE(_ACK)
======================  ============================================================  ==========
"""

from __future__ import annotations

from typing import Any, Mapping

from zgrad.errors import ProtocolError

__all__ = ["Kind", "KIND_NAMES", "VALID_KINDS", "check_meta", "SCHEMAS"]


class Kind:
    """Message kind constants (the transport reserves 0xFF00 and up)."""

    CALL = 1
    RESULT = 2
    ERROR = 3
    RREF_FETCH = 4
    RREF_FORK = 5
    RREF_DELETE = 6
    SHUTDOWN_READY = 7
    SHUTDOWN_GO = 8
    GRAD = 16
    GRAD_ACK = 17
    DISCOVER = 18
    DISCOVER_ACK = 19
    START = 20
    CONTEXT_RELEASE = 21
    FAILURE = 22
    PASS_END = 23
    PASS_END_ACK = 24
    FAILURE_ACK = 25
    CONTEXT_RELEASE_ACK = 26


KIND_NAMES = {value: name for name, value in vars(Kind).items() if name.isupper()}
VALID_KINDS = frozenset(KIND_NAMES)
# Kinds that only ever answer a request (``Mesh.reply``): the mesh hands such a reply that came
# over the link to the thread waiting for it (``Mesh.call``, ``Mesh.collect``).
REPLY_KINDS = frozenset({Kind.RESULT, Kind.ERROR, Kind.GRAD_ACK, Kind.DISCOVER_ACK})

_INT = (int,)
_OPT_INT = (int, type(None))
_NUMBER = (int, float)

# key -> (allowed types, required)
SCHEMAS: dict[int, dict[str, tuple[tuple[type, ...], bool]]] = {
    Kind.CALL: {
        "target": ((str,), True), "payload": ((bytes,), True), "timeout_s": (_NUMBER, True),
        "rref": (_OPT_INT, False), "fork": (_OPT_INT, False), "context": (_OPT_INT, False),
        "grad_msg": (_OPT_INT, False), "released": ((list,), False),
    },
    Kind.RESULT: {"payload": ((bytes,), True), "grad_msg": (_OPT_INT, False)},
    Kind.ERROR: {"type": ((str,), True), "message": ((str,), True), "worker": ((str,), True), "traceback": ((str,), True)},
    Kind.RREF_FETCH: {"rref": (_INT, True), "context": (_OPT_INT, False), "released": ((list,), False)},
    Kind.RREF_FORK: {"rref": (_INT, True), "fork": (_INT, True)},
    Kind.RREF_DELETE: {"rref": (_INT, True), "fork": (_INT, True)},
    Kind.SHUTDOWN_READY: {},
    Kind.SHUTDOWN_GO: {"dead": ((list,), True)},
}


def check_meta(kind: int, meta: Any, schema: Mapping[str, tuple[tuple[type, ...], bool]] | None = None) -> dict[str, Any]:
    """Return ``meta`` if it is a map that fits the schema of ``kind``.

    Raises:
        ProtocolError: not a map, an unknown or missing key, or a value of the wrong type.
    """
    if schema is None:
        schema = SCHEMAS.get(kind)
        if schema is None:
            raise ProtocolError(f"no schema for message kind {kind}")
    if not isinstance(meta, dict):
        raise ProtocolError(f"{KIND_NAMES.get(kind, kind)} metadata must be a map, got {type(meta).__name__}")
    for key, value in meta.items():
        spec = schema.get(key)  # every schema key is a str: any other key misses
        if spec is None:
            raise ProtocolError(f"{KIND_NAMES.get(kind, kind)} metadata has an unknown key {key!r}")
        types = spec[0]
        if type(value) in types:
            continue  # the exact type is allowed (a bool only where bool is listed)
        if not isinstance(value, types) or (isinstance(value, bool) and bool not in types):
            raise ProtocolError(
                f"{KIND_NAMES.get(kind, kind)} metadata key {key!r} has type {type(value).__name__}; "
                f"expected {' or '.join(t.__name__ for t in types)}")
    required = _required(schema)
    if not required <= meta.keys():
        missing = next(key for key in schema if key in required and key not in meta)
        raise ProtocolError(f"{KIND_NAMES.get(kind, kind)} metadata lacks the required key {missing!r}")
    return meta


_REQUIRED: dict[int, tuple[Mapping[str, Any], frozenset[str]]] = {}


def _required(schema: Mapping[str, tuple[tuple[type, ...], bool]]) -> frozenset[str]:
    """The required keys of ``schema`` (cached per schema object; schemas are module constants)."""
    cached = _REQUIRED.get(id(schema))
    if cached is not None and cached[0] is schema:
        return cached[1]
    required = frozenset(key for key, (_, needed) in schema.items() if needed)
    _REQUIRED[id(schema)] = (schema, required)
    return required
