"""The distributed engine's wire vocabulary: message kinds, one typed record per kind, their schemas.

Every engine message is ``(kind, body, arrays)``: ``body`` a map of plain values (msgpack on the
wire), ``arrays`` the gradients it carries. Records use PyTorch's names (``context_id``,
``autograd_message_id``, ``retain_graph``); on the wire the keys stay short (``ctx``, ``msg``,
``retain``), which saves bytes on every message. ``to_body``/``from_body`` are the only places that
spell them. Tasks, reports and closing are explained in ``dist/passes.py``, the root's side in
``dist/root.py``, discovery in ``dist/discovery.py``.

=================  ===================================================  ==========================
kind               body                                                 answered by
=================  ===================================================  ==========================
GRAD               ctx, pass, msg, root, retain, mode, task, [trace]    GRAD_ACK, to the root
GRAD_ACK           ctx, pass, task, children ([[task, dst, msg], ...]), -
                   error (str or None), open (bool), [grads] (GRADs for
                   the root riding in it: [[task, msg, n arrays], ...])
DISCOVER           ctx, pass, msg, root, retain, task, [trace]          DISCOVER_ACK, to the root
DISCOVER_ACK       ctx, pass, task, children, error, held (bool),       -
                   [discover] (DISCOVERs for the root: [[task, msg], ...])
START              ctx, pass, [task]                                    with task: GRAD_ACK
PASS_END           ctx, pass, seq                                       PASS_END_ACK
FAILURE            ctx, pass, error, seq                                FAILURE_ACK
CONTEXT_RELEASE    ctx, seq                                             CONTEXT_RELEASE_ACK
*_ACK              seq, [error], PASS_END_ACK: unexecuted               -
                   ([[msg, peer], ...])
=================  ===================================================  ==========================

``trace`` is present (True) only on the messages of a pass its root records
(``zgrad.distributed.autograd.trace``): a worker that creates the pass from such a message records
its share too.
"""

from __future__ import annotations

from typing import Any, Mapping, NamedTuple, Sequence, Union

from zgrad.errors import ProtocolError

__all__ = [
    "GRAD", "GRAD_ACK", "DISCOVER", "DISCOVER_ACK", "START", "PASS_END", "PASS_END_ACK", "FAILURE", "FAILURE_ACK",
    "CONTEXT_RELEASE", "CONTEXT_RELEASE_ACK", "KINDS", "ACK_KINDS", "REPORT_KINDS", "DISCOVERY_KINDS", "BODY_SCHEMAS",
    "Grad", "WorkReport", "Discover", "DiscoveryReport", "Start", "PassEnd", "Failure", "ContextRelease", "Answer",
    "Report", "Message", "TRACE_KEY", "crash_report", "pass_id_of", "pass_key", "message_id", "carries_work", "root_of",
]

GRAD = "GRAD"
GRAD_ACK = "GRAD_ACK"
DISCOVER = "DISCOVER"
DISCOVER_ACK = "DISCOVER_ACK"
START = "START"
PASS_END = "PASS_END"
PASS_END_ACK = "PASS_END_ACK"
FAILURE = "FAILURE"
FAILURE_ACK = "FAILURE_ACK"
CONTEXT_RELEASE = "CONTEXT_RELEASE"
CONTEXT_RELEASE_ACK = "CONTEXT_RELEASE_ACK"

KINDS = (GRAD, GRAD_ACK, DISCOVER, DISCOVER_ACK, START, PASS_END, PASS_END_ACK, FAILURE, FAILURE_ACK,
         CONTEXT_RELEASE, CONTEXT_RELEASE_ACK)
ACK_KINDS = frozenset({PASS_END_ACK, FAILURE_ACK, CONTEXT_RELEASE_ACK})
REPORT_KINDS = frozenset({GRAD_ACK, DISCOVER_ACK})
DISCOVERY_KINDS = (DISCOVER, DISCOVER_ACK, START)  # what SMART mode costs on top of FAST

Schema = dict[str, tuple[tuple[type, ...], bool]]  # key -> (allowed types, required)
_INT = (int,)
_OPT_STR = (str, type(None))
_ACK: Schema = {"seq": (_INT, True), "error": (_OPT_STR, False)}
_REPORT: Schema = {"ctx": (_INT, True), "pass": (_INT, True), "task": (_INT, True), "children": ((list,), True),
                   "error": (_OPT_STR, True)}
_TASK_START: Schema = {"ctx": (_INT, True), "pass": (_INT, True), "msg": (_INT, True), "root": (_INT, True),
                       "retain": ((bool,), True), "task": (_INT, True), "trace": ((bool,), False)}
BODY_SCHEMAS: dict[str, Schema] = {
    GRAD: {**_TASK_START, "mode": ((str,), True)},
    GRAD_ACK: {**_REPORT, "open": ((bool,), True), "grads": ((list,), False)},
    DISCOVER: _TASK_START,
    DISCOVER_ACK: {**_REPORT, "held": ((bool,), True), "discover": ((list,), False)},
    START: {"ctx": (_INT, True), "pass": (_INT, True), "task": (_INT, False)},
    PASS_END: {"ctx": (_INT, True), "pass": (_INT, True), "seq": (_INT, True)},
    PASS_END_ACK: {**_ACK, "unexecuted": ((list,), True)},
    FAILURE: {"ctx": (_INT, True), "pass": (_INT, True), "error": (_OPT_STR, True), "seq": (_INT, True)},
    FAILURE_ACK: _ACK,
    CONTEXT_RELEASE: {"ctx": (_INT, True), "seq": (_INT, True)},
    CONTEXT_RELEASE_ACK: _ACK,
}
"""The type of every body key, checked (by the messenger) before the engine sees a message."""


class Grad(NamedTuple):
    """GRAD: the gradients (the arrays) for send function ``autograd_message_id``; they start task
    ``task_id`` of the pass on the receiver."""

    KIND = GRAD
    context_id: int
    pass_id: int
    autograd_message_id: int
    root: int
    retain_graph: bool
    mode: str
    task_id: int
    trace: bool = False

    def to_body(self) -> dict[str, Any]:
        body = {"ctx": self.context_id, "pass": self.pass_id, "msg": self.autograd_message_id, "root": self.root,
                "retain": self.retain_graph, "mode": self.mode, "task": self.task_id}
        if self.trace:
            body[TRACE_KEY] = True
        return body

    @classmethod
    def from_body(cls, body: Mapping[str, Any]) -> "Grad":
        return cls(body["ctx"], body["pass"], body["msg"], body["root"], bool(body["retain"]), body["mode"],
                   body["task"], bool(body.get(TRACE_KEY, False)))


class WorkReport(NamedTuple):
    """GRAD_ACK: task ``task_id`` (a run of the local graph) ended; to the pass's root.

    ``children`` are the tasks it started (``[task, worker, autograd_message_id]``), ``still_open``
    says that the reporting worker still holds the pass, ``grads`` describes the GRADs for the
    root that ride in the report (``[task, autograd_message_id, number of arrays]``).
    """

    KIND = GRAD_ACK
    context_id: int
    pass_id: int
    task_id: int
    children: list[list[int]]
    error: str | None
    still_open: bool
    grads: list[list[int]] = []

    def to_body(self) -> dict[str, Any]:
        body = {"ctx": self.context_id, "pass": self.pass_id, "task": self.task_id, "children": self.children,
                "error": self.error, "open": self.still_open}
        if self.grads:
            body["grads"] = self.grads
        return body

    @classmethod
    def from_body(cls, body: Mapping[str, Any], arrays: Sequence[Any] = ()) -> "WorkReport":
        """Raises: ProtocolError: a malformed list (checked before anything counts the report)."""
        _check_report(GRAD_ACK, body, arrays)
        return cls(body["ctx"], body["pass"], body["task"], body["children"], body["error"], bool(body.get("open")),
                   body.get("grads", []))


class Discover(NamedTuple):
    """DISCOVER: send function ``autograd_message_id`` takes part in the pass (SMART); starts
    discovery task ``task_id`` on the receiver."""

    KIND = DISCOVER
    context_id: int
    pass_id: int
    autograd_message_id: int
    root: int
    retain_graph: bool
    task_id: int
    trace: bool = False

    def to_body(self) -> dict[str, Any]:
        body = {"ctx": self.context_id, "pass": self.pass_id, "msg": self.autograd_message_id, "root": self.root,
                "retain": self.retain_graph, "task": self.task_id}
        if self.trace:
            body[TRACE_KEY] = True
        return body

    @classmethod
    def from_body(cls, body: Mapping[str, Any]) -> "Discover":
        return cls(body["ctx"], body["pass"], body["msg"], body["root"], bool(body["retain"]), body["task"],
                   bool(body.get(TRACE_KEY, False)))


class DiscoveryReport(NamedTuple):
    """DISCOVER_ACK: discovery task ``task_id`` ended; to the pass's root. ``held``: the reporting
    worker holds nodes until discovery is over; ``discover``: the DISCOVERs for the root itself
    (``[task, autograd_message_id]``), riding in the report."""

    KIND = DISCOVER_ACK
    context_id: int
    pass_id: int
    task_id: int
    children: list[list[int]]
    error: str | None
    held: bool
    discover: list[list[int]] = []

    def to_body(self) -> dict[str, Any]:
        body = {"ctx": self.context_id, "pass": self.pass_id, "task": self.task_id, "children": self.children,
                "error": self.error, "held": self.held}
        if self.discover:
            body["discover"] = self.discover
        return body

    @classmethod
    def from_body(cls, body: Mapping[str, Any], arrays: Sequence[Any] = ()) -> "DiscoveryReport":
        """Raises: ProtocolError: a malformed list (checked before anything counts the report)."""
        _check_report(DISCOVER_ACK, body, arrays)
        return cls(body["ctx"], body["pass"], body["task"], body["children"], body["error"], bool(body.get("held")),
                   body.get("discover", []))


Report = Union[WorkReport, DiscoveryReport]


class Start(NamedTuple):
    """START (SMART): discovery is over, the receiver's marks are final. With ``task_id``: release
    the held nodes and run them as that task (it reports to the root)."""

    KIND = START
    context_id: int
    pass_id: int
    task_id: int | None = None

    def to_body(self) -> dict[str, Any]:
        body = {"ctx": self.context_id, "pass": self.pass_id}
        if self.task_id is not None:
            body["task"] = self.task_id
        return body

    @classmethod
    def from_body(cls, body: Mapping[str, Any]) -> "Start":
        return cls(body["ctx"], body["pass"], body.get("task"))


class PassEnd(NamedTuple):
    """PASS_END: forget the pass; answer with the send functions that never got a gradient."""

    KIND = PASS_END
    context_id: int
    pass_id: int
    seq: int = 0

    def to_body(self) -> dict[str, Any]:
        return {"ctx": self.context_id, "pass": self.pass_id, "seq": self.seq}

    @classmethod
    def from_body(cls, body: Mapping[str, Any]) -> "PassEnd":
        return cls(body["ctx"], body["pass"], body["seq"])


class Failure(NamedTuple):
    """FAILURE: the pass failed; forget it and tell the workers you know, then answer."""

    KIND = FAILURE
    context_id: int
    pass_id: int
    error: str | None
    seq: int = 0

    def to_body(self) -> dict[str, Any]:
        return {"ctx": self.context_id, "pass": self.pass_id, "error": self.error, "seq": self.seq}

    @classmethod
    def from_body(cls, body: Mapping[str, Any]) -> "Failure":
        return cls(body["ctx"], body["pass"], body.get("error"), body["seq"])


class ContextRelease(NamedTuple):
    """CONTEXT_RELEASE: release the context; tell the workers it reached, then answer."""

    KIND = CONTEXT_RELEASE
    context_id: int
    seq: int = 0

    def to_body(self) -> dict[str, Any]:
        return {"ctx": self.context_id, "seq": self.seq}

    @classmethod
    def from_body(cls, body: Mapping[str, Any]) -> "ContextRelease":
        return cls(body["ctx"], body["seq"])


Message = Union[Grad, WorkReport, Discover, DiscoveryReport, Start, PassEnd, Failure, ContextRelease]
ACK_OF = {PASS_END: PASS_END_ACK, FAILURE: FAILURE_ACK, CONTEXT_RELEASE: CONTEXT_RELEASE_ACK}


class Answer(NamedTuple):
    """The answer to a PASS_END, FAILURE or CONTEXT_RELEASE (``*_ACK``). ``lost`` (never on the
    wire): the engine made it up because the peer is gone."""

    seq: int
    error: str | None = None
    unexecuted: list[list[int]] = []
    lost: bool = False

    def to_body(self, kind: str) -> dict[str, Any]:
        body: dict[str, Any] = {"seq": self.seq}
        if self.error is not None:
            body["error"] = self.error
        if kind == PASS_END_ACK:
            body["unexecuted"] = self.unexecuted
        return body

    @classmethod
    def from_body(cls, body: Mapping[str, Any]) -> "Answer":
        return cls(body.get("seq"), body.get("error"), body.get("unexecuted", []))


def crash_report(kind: str, body: Mapping[str, Any], error: str, sender: int) -> tuple[int, Report] | None:
    """The report (and the root it goes to) that fails the task a message of ``kind`` from
    ``sender`` started, when handling it crashed; None if the message starts no task."""
    task_id = body.get("task")
    if kind not in (GRAD, DISCOVER, START) or not isinstance(task_id, int):
        return None
    context_id, pass_id = body.get("ctx"), body.get("pass")
    if kind == DISCOVER:
        report: Report = DiscoveryReport(context_id, pass_id, task_id, [], error, False)
    else:
        report = WorkReport(context_id, pass_id, task_id, [], error, False)
    return root_of(body, sender), report


def root_of(body: Mapping[str, Any], default: int) -> int:
    """The root named by a GRAD or DISCOVER; ``default`` for messages that name none (they come
    from the root, or go to it)."""
    return body.get("root", default)


def carries_work(body: Mapping[str, Any]) -> bool:
    """A GRAD_ACK with GRADs for the root riding in it (it runs graph work where it arrives)."""
    return "grads" in body


TRACE_KEY = "trace"  # in the body of a GRAD or DISCOVER of a pass whose root records it


def pass_id_of(body: Mapping[str, Any]) -> int | None:
    """The pass a message is about, if any."""
    return body.get("pass")


def pass_key(body: Mapping[str, Any]) -> tuple[int, int] | None:
    """``(context_id, pass_id)`` of a message about one pass, else None."""
    pass_id = body.get("pass")
    return None if pass_id is None else (body.get("ctx"), pass_id)


def message_id(kind: str, body: Mapping[str, Any]) -> int:
    """What tells this message from the others of its kind between two workers in one pass: its
    task (GRAD, DISCOVER, their reports, START), else its ``seq``."""
    ident = body.get("task", body.get("seq"))
    return -1 if ident is None else ident


def _int_lists(value: Any, length: int) -> bool:
    return isinstance(value, list) and all(
        isinstance(v, list) and len(v) == length and all(isinstance(x, int) and not isinstance(x, bool) for x in v)
        for v in value)


def _check_report(kind: str, body: Mapping[str, Any], arrays: Sequence[Any]) -> None:
    """Check a report's lists before anything acts on it.

    Raises:
        ProtocolError: naming the malformed field.
    """
    if not _int_lists(body["children"], 3):
        raise ProtocolError(f"{kind} children must be [task, worker, autograd_message_id] triples")
    if "discover" in body and not _int_lists(body["discover"], 2):
        raise ProtocolError(f"{kind} discover must be [task, autograd_message_id] pairs")
    if "grads" in body and (not _int_lists(body["grads"], 3) or any(g[2] < 0 for g in body["grads"])
                            or sum(g[2] for g in body["grads"]) != len(arrays)):
        raise ProtocolError(f"{kind} grads must be [task, autograd_message_id, number of arrays] triples that "
                            "account for every array of the message")
