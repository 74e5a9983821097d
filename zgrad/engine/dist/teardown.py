"""Ending a pass or a context on every worker: FAILURE, PASS_END and CONTEXT_RELEASE.

* FAILURE: the root failed the pass; every worker it reaches forgets the pass and forwards FAILURE
  to the workers it knows (recursively, once per worker), answering once its own broadcast is
  answered.
* PASS_END: the root's exact verdict when some worker did not close a pass by itself: each
  participant forgets the pass and answers with the send functions that never got a gradient.
* CONTEXT_RELEASE: the context is released on every worker it reached, recursively; a released
  id is remembered (``ContextContainer``), so a late message cannot revive the context.

Broadcasts are retried when a send fails; a lost worker counts as answered (``dist/messaging.py``).
"""

from __future__ import annotations

import threading
from typing import Any, Callable, Sequence

from zgrad.engine.dist.context import ContextContainer
from zgrad.engine.dist.messaging import Courier
from zgrad.engine.dist.passes import PassState
from zgrad.engine.dist.protocol import Answer, ContextRelease, Failure, PassEnd
from zgrad.errors import AutogradError

__all__ = ["Teardown"]

EndAnswers = Callable[[list[str], list[list[int]]], None]
"""``done(errors, unexecuted)``: every participant answered a PASS_END (``unexecuted``:
``[autograd_message_id, peer, holder]`` of the sends that never got a gradient there)."""


class Teardown:
    """This worker's part in ending passes and contexts everywhere. Thread-safe; never blocks."""

    def __init__(self, contexts: ContextContainer, courier: Courier) -> None:
        self.contexts = contexts
        self.courier = courier
        self.rank = contexts.rank

    # --- failure ----------------------------------------------------------------------------------

    def fail_pass(self, state: PassState, error: str, participants: set[int], done: Callable[[], None]) -> None:
        """End the pass here and tell every worker involved that it failed; ``done`` once all answered."""
        state.ctx.pass_table.end(state.pass_id)
        targets = (participants | state.participants | state.ctx.known_workers) - {self.rank}
        self.courier.broadcast(targets, Failure(state.ctx.context_id, state.pass_id, error), done)

    def on_failure(self, src: int, body: dict[str, Any], _arrays: Sequence[Any]) -> None:
        """FAILURE: forget the pass, forward to the workers this one knows (the first time), answer."""
        failure = Failure.from_body(body)
        try:
            ctx = self.contexts.get(failure.context_id)
        except AutogradError:
            self.courier.reply(src, failure)
            return
        if not ctx.pass_table.end(failure.pass_id):
            self.courier.reply(src, failure)
            return
        with ctx.lock:
            targets = set(ctx.known_workers) - {src, self.rank}
        self.courier.broadcast(targets, failure, lambda: self.courier.reply(src, failure))

    # --- the root's exact verdict -----------------------------------------------------------------

    def end_pass(self, state: PassState, others: list[int], done: EndAnswers) -> None:
        """Send PASS_END to ``others``; ``done(errors, unexecuted)`` once every one answered."""
        waiting = {"n": len(others)}
        lock = threading.Lock()
        errors: list[str] = []
        unexecuted: list[list[int]] = []

        def answered(src: int, answer: Answer) -> None:
            with lock:
                if answer.error:
                    errors.append(str(answer.error))
                for entry in answer.unexecuted:
                    if isinstance(entry, list) and len(entry) == 2:
                        unexecuted.append([entry[0], entry[1], src])
                waiting["n"] -= 1
                last = waiting["n"] == 0
            if last:
                done(errors, unexecuted)

        if not others:
            done(errors, unexecuted)
            return
        for dst in others:
            self.courier.request(dst, PassEnd(state.ctx.context_id, state.pass_id), answered)

    def on_pass_end(self, src: int, body: dict[str, Any], _arrays: Sequence[Any]) -> None:
        """PASS_END: forget the pass; answer with its sends that never got a gradient here."""
        pass_end = PassEnd.from_body(body)
        unexecuted: list[list[int]] = []
        try:
            ctx = self.contexts.get(pass_end.context_id)
            state = ctx.pass_table.get(pass_end.pass_id)
            if state is not None:
                unexecuted = state.unexecuted_sends()
                ctx.pass_table.end(pass_end.pass_id)
        except AutogradError:
            pass  # released meanwhile: nothing is left here
        self.courier.reply(src, pass_end, Answer(0, unexecuted=unexecuted))

    # --- release --------------------------------------------------------------------------------

    def release_context(self, context_id: int, done: Callable[[], None]) -> None:
        """Release the context here and on every worker it reached, recursively; ``done`` when all answered."""
        self.broadcast_release(context_id, self.release_here(context_id) or set(), done)

    def broadcast_release(self, context_id: int, targets: set[int], done: Callable[[], None]) -> None:
        """Send CONTEXT_RELEASE to ``targets``; ``done`` once every one answered (each after
        forwarding it to the workers the context reached from there)."""
        self.courier.broadcast(targets, ContextRelease(context_id), done)

    def on_release(self, src: int, body: dict[str, Any], _arrays: Sequence[Any]) -> None:
        """CONTEXT_RELEASE: release here, forward to the workers the context reached from here, answer."""
        release = ContextRelease.from_body(body)
        targets = self.release_here(release.context_id, src)
        if not targets:
            self.courier.reply(src, release)
            return
        self.courier.broadcast(targets, release, lambda: self.courier.reply(src, release))

    def release_here(self, context_id: int, src: int | None = None) -> set[int] | None:
        """Release the context here; the workers it reached from here (``src``, the worker that
        asked, excepted), to release it next; None if it was unknown here."""
        ctx = self.contexts.release(context_id)
        if ctx is None:
            return None
        ctx.pass_table.end_all()
        with ctx.lock:
            return set(ctx.known_workers) - {src, self.rank}
