"""How the distributed engine talks to other workers: one counted way out, and requests with answers.

The engine reaches the network only through a :class:`Messenger` (the RPC agent implements it, a
test an in-memory fake), so FAST and SMART run against any message order without sockets or
threads. The :class:`Courier` on top of it counts every message by kind (``get_debug_info``),
shows the messages of recorded passes to the :class:`~zgrad.engine.dist.trace.TraceRecorder`,
and matches answers to requests (PASS_END, FAILURE, CONTEXT_RELEASE) by ``seq``; a peer that is
lost answers every request still waiting on it, with an error.
"""

from __future__ import annotations

import itertools
import logging
import threading
from collections import Counter
from typing import Any, Callable, Protocol, Sequence

from zgrad.engine.dist.protocol import ACK_OF, Answer, ContextRelease, Failure, Message, PassEnd
from zgrad.engine.dist.trace import TraceRecorder

__all__ = ["Messenger", "Courier", "AnswerHandler", "BROADCAST_RETRIES"]

log = logging.getLogger("zgrad.engine")

BROADCAST_RETRIES = 3

AnswerHandler = Callable[[int, Answer], None]
Request = PassEnd | Failure | ContextRelease


class Messenger(Protocol):
    """What the engine needs from the network (implemented by the RPC agent, or a test fake)."""

    rank: int

    def worker_name(self, rank: int) -> str:
        """The name of worker ``rank`` (unquoted)."""

    def send(self, dst: int, kind: str, body: dict[str, Any], arrays: Sequence[Any] = (), reply: Any = None) -> None:
        """Send one message (``reply``: a token the messenger gave with a received message, which
        this one answers on the socket the sender waits on); may raise if ``dst`` is known to be
        unreachable. A messenger may also offer ``post(dst, kind, body, arrays) -> request id``
        and ``collect(expected, wake_fd, timeout_s)``: the root's waiting thread then sends its
        GRADs as requests and receives their reports itself (on a socket of its own, for all
        but big gradients)."""

    def submit(self, work: Callable[[], None]) -> None:
        """Run ``work()`` soon, where it may take its time: now, on the thread that received the
        message that caused it (the RPC agent's inbound thread, taken over if it runs long), or on
        a worker thread (the callee pool); never blocks the caller on other work."""


class Courier:
    """Every message this worker's engine sends and receives, counted by kind; requests and their
    answers. Thread-safe."""

    def __init__(self, messenger: Messenger, recorder: TraceRecorder) -> None:
        self.messenger = messenger
        self.rank = messenger.rank
        self.recorder = recorder
        self.sent: Counter[str] = Counter()
        self.received: Counter[str] = Counter()
        self._lock = threading.Lock()
        self._seq = itertools.count(1)
        self._awaiting: dict[int, tuple[int, AnswerHandler]] = {}

    def worker_name(self, rank: int) -> str:
        return self.messenger.worker_name(rank)

    def send(self, dst: int, message: Message, arrays: Sequence[Any] = (), reply: Any = None) -> None:
        """Send ``message`` (and its gradients) to ``dst`` (``reply``: as the answer to the message
        that token stands for, see :meth:`DistEngine.receive`).

        Raises:
            Exception: whatever the messenger raises for an unreachable ``dst``.
        """
        body = self._outgoing(dst, message)
        if reply is None:
            self.messenger.send(dst, message.KIND, body, arrays)
        else:
            self.messenger.send(dst, message.KIND, body, arrays, reply=reply)

    @property
    def can_post(self) -> bool:
        """Whether the messenger lets a waiting thread collect the answers itself (``post``)."""
        return hasattr(self.messenger, "post")

    def post(self, dst: int, message: Message, arrays: Sequence[Any] = ()) -> int:
        """Send ``message`` as a request whose answer comes back to the calling thread; the id to
        wait for with :meth:`collect`.

        Raises:
            Exception: whatever the messenger raises for an unreachable ``dst``.
        """
        return self.messenger.post(dst, message.KIND, self._outgoing(dst, message), arrays)

    def _outgoing(self, dst: int, message: Message) -> dict[str, Any]:
        """Count ``message``, show it to the recorder, and return its body."""
        self.sent[message.KIND] += 1
        body = message.to_body()
        if self.recorder.recordings:
            self.recorder.sending(dst, message.KIND, body)
        return body

    def collect(self, expected: dict[int, set[int]], wake_fd: int, timeout_s: float) -> None:
        """Receive answers to :meth:`post` on this thread (see ``Messenger.collect``)."""
        self.messenger.collect(expected, wake_fd, timeout_s)

    def request(self, dst: int, message: Request, on_answer: AnswerHandler) -> None:
        """Send ``message`` and hand its answer to ``on_answer`` (once). An unreachable ``dst``
        answers at once, with an error."""
        seq = next(self._seq)
        with self._lock:
            self._awaiting[seq] = (dst, on_answer)
        try:
            self.send(dst, message._replace(seq=seq))
        except Exception as exc:  # noqa: BLE001 - an unreachable peer answers with an error
            self._answered(dst, Answer(seq, f"cannot reach worker {self.worker_name(dst)!r}: {exc}"))

    def reply(self, dst: int, request: Request, answer: Answer = Answer(0)) -> None:
        """Answer ``request`` from ``dst`` (its ``*_ACK``); nobody waits if ``dst`` is gone."""
        kind = ACK_OF[request.KIND]
        self.sent[kind] += 1
        try:
            self.messenger.send(dst, kind, answer._replace(seq=request.seq).to_body(kind))
        except Exception:  # noqa: BLE001 - the requester is gone; nobody waits for this
            log.debug("worker %s: could not answer %s to rank %s", self.rank, kind, dst)

    def answered(self, src: int, body: dict[str, Any]) -> None:
        """An ``*_ACK`` arrived from ``src``: hand it to the request's handler."""
        self._answered(src, Answer.from_body(body))

    def _answered(self, src: int, answer: Answer) -> None:
        with self._lock:
            entry = self._awaiting.get(answer.seq)
            if entry is None or entry[0] != src:
                return
            del self._awaiting[answer.seq]
        entry[1](src, answer)

    def peer_lost(self, rank: int, error: str) -> None:
        """Answer every request still waiting on ``rank``, with ``error``."""
        with self._lock:
            lost = [seq for seq, (dst, _) in self._awaiting.items() if dst == rank]
        for seq in lost:
            self._answered(rank, Answer(seq, error, lost=True))

    def broadcast(self, targets: set[int], message: Request, done: Callable[[], None],
                  retries: int = BROADCAST_RETRIES) -> None:
        """Send ``message`` to each target and call ``done`` once every one answered or was lost.

        A target that could not be sent to (but is not lost) is tried again, ``retries`` times.
        """
        remaining = {"n": len(targets)}
        lock = threading.Lock()

        def send_to(dst: int, attempts_left: int) -> None:
            def acked(_src: int, answer: Answer) -> None:
                if answer.error and not answer.lost and attempts_left > 0:
                    send_to(dst, attempts_left - 1)
                    return
                with lock:
                    remaining["n"] -= 1
                    last = remaining["n"] == 0
                if last:
                    done()

            self.request(dst, message, acked)

        if not targets:
            done()
            return
        for dst in sorted(targets):
            send_to(dst, retries)
