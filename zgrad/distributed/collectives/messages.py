"""Message kinds of the process group's mesh and the checks every inbound message passes.

The process group runs its own mesh (``zgrad.transport``), so these kinds are its alone:

======  =====================================================================  ==============
kind    meta (msgpack)                                                         buffers
======  =====================================================================  ==============
DATA    ``[group, seq, tag, [collective, reduce_op, dtype, shape, root,         the payload: 0
        algorithm]]``: group id, sequence number within the group, step and    or 1 raw array
        chunk of the algorithm, the sender's fingerprint                       buffer
ABORT   ``{"group": int, "seq": int, "error": str}``: the sender failed that   none
        collective (mismatch, timeout, lost peer); the group fails everywhere
======  =====================================================================  ==============

Checks run on the mesh's I/O thread, in order: kind, metadata shape and types, id ranges, buffer
count. A message that fails one is counted under its reason and dropped; the rank keeps serving.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from zgrad.distributed.collectives.fingerprint import Fingerprint
from zgrad.errors import ProtocolError

__all__ = ["KIND_DATA", "KIND_ABORT", "VALID_KINDS", "Data", "check_data", "check_abort", "MAX_GROUP_ID", "MAX_DIMS"]

KIND_DATA = 1
KIND_ABORT = 2
VALID_KINDS = frozenset({KIND_DATA, KIND_ABORT})

MAX_GROUP_ID = (1 << 32) - 1
MAX_DIMS = 64
_MAX_TEXT = 1 << 16


class Data(NamedTuple):
    """A checked DATA message's metadata."""

    group: int
    seq: int
    tag: int
    fingerprint: Fingerprint


def _uint(value: Any, what: str, limit: int = (1 << 63) - 1) -> int:
    if type(value) is not int or not 0 <= value <= limit:
        raise ProtocolError(f"{what} must be an integer in 0..{limit}, got {value!r}")
    return value


def _text(value: Any, what: str) -> str:
    if type(value) is not str or len(value) > _MAX_TEXT:
        raise ProtocolError(f"{what} must be a string of at most {_MAX_TEXT} characters")
    return value


KNOWN_MAX = 256  # checked fingerprints a receiver remembers (a collective's messages share one)


def check_data(meta: Any, nbuffers: int, known: dict[tuple, Fingerprint] | None = None) -> Data:
    """Return the DATA metadata ``meta`` if it is well formed.

    Args:
        known: fingerprints already checked, by value (the receiver's; updated here): every
            message of a collective carries the same one, so it is checked once.

    Raises:
        ProtocolError: naming the first thing that is wrong.
    """
    if type(meta) is not list or len(meta) != 4:
        raise ProtocolError("DATA metadata must be a list [group, seq, tag, fingerprint]")
    group = _uint(meta[0], "DATA group", MAX_GROUP_ID)
    seq = _uint(meta[1], "DATA seq")
    tag = _uint(meta[2], "DATA tag")
    if nbuffers > 1:
        raise ProtocolError(f"a DATA message carries at most one buffer, got {nbuffers}")
    fp = meta[3]
    if known is None:
        return Data(group, seq, tag, _check_fingerprint(fp))
    key = None
    if type(fp) is list and len(fp) == 6 and type(fp[3]) is list:
        try:
            key = (fp[0], fp[1], fp[2], tuple(fp[3]), fp[4], fp[5])
            found = known.get(key)
        except TypeError:  # an unhashable part: not a fingerprint (the checks say why)
            key = found = None
        if found is not None and key == tuple(found) and all(map(_same_type, key, found)):
            return Data(group, seq, tag, found)
    checked = _check_fingerprint(fp)
    if len(known) >= KNOWN_MAX:
        known.clear()
    known[tuple(checked)] = checked
    return Data(group, seq, tag, checked)


def _same_type(a: Any, b: Any) -> bool:
    return type(a) is type(b)


def _check_fingerprint(fp: Any) -> Fingerprint:
    if type(fp) is not list or len(fp) != 6:
        raise ProtocolError("DATA fingerprint must be a list [collective, reduce_op, dtype, shape, root, algorithm]")
    shape = fp[3]
    if type(shape) is not list or len(shape) > MAX_DIMS:
        raise ProtocolError(f"DATA fingerprint shape must be a list of at most {MAX_DIMS} sizes")
    if type(fp[4]) is not int or fp[4] < -1:
        raise ProtocolError(f"DATA fingerprint root must be an integer >= -1, got {fp[4]!r}")
    return Fingerprint(_text(fp[0], "DATA collective"), _text(fp[1], "DATA reduce_op"), _text(fp[2], "DATA dtype"),
                       tuple(_uint(n, "DATA shape entry") for n in shape), fp[4], _text(fp[5], "DATA algorithm"))


def check_abort(meta: Any) -> tuple[int, int, str]:
    """Return ``(group, seq, error)`` of ABORT metadata ``meta`` if it is well formed.

    Raises:
        ProtocolError: naming the first thing that is wrong.
    """
    if type(meta) is not dict or set(meta) != {"group", "seq", "error"}:
        raise ProtocolError("ABORT metadata must be a map with exactly the keys group, seq, error")
    return _uint(meta["group"], "ABORT group", MAX_GROUP_ID), _uint(meta["seq"], "ABORT seq"), _text(meta["error"], "ABORT error")
