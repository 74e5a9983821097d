"""FAST and SMART: what a distributed backward pass counts from, and when it is complete.

A mode answers four questions for the engine, and the engine asks no other (no mode is ever
compared by name):

* which send functions take part in a pass (its :class:`SendSelection`): FAST: every one of the
  context (PyTorch's algorithm, ``docs/smart-mode.md``); SMART: those that discovery marks;
* what a worker counts dependencies from when the pass is created there: FAST from the roots and
  every send function; SMART from the roots only, holding the nodes that several sources reach;
* what a GRAD for a send function changes: nothing in FAST (it was counted); in SMART the send
  takes part, so what it reaches is counted then;
* whether discovery gates completion (SMART), and what the root's verdict rests on once every task
  reported: FAST: every worker closed the pass and every send of the root got its gradient;
  SMART: every marked send got its gradient.
"""

from __future__ import annotations

from collections import Counter
from typing import Protocol, Sequence

from zgrad.engine.dist.discovery import Discovery, shared_nodes
from zgrad.engine.dist.protocol import DISCOVERY_KINDS
from zgrad.engine.graph import Node
from zgrad.engine.graph_task import GraphTask
from zgrad.engine.send_recv import SendNode
from zgrad.errors import AutogradError

__all__ = ["SendSelection", "AllSends", "Mode", "FastMode", "SmartMode", "MODE_NAMES", "discovery_of"]

class SendSelection(Protocol):
    """Which send functions of the context take part in a pass on this worker."""

    def takes_part(self, send: SendNode) -> bool:
        """``send`` takes part (as far as known)."""

    def all_fed(self, executed: set[int], context_sends: int) -> bool:
        """Every send that takes part got its gradient (and that set is final)."""

    def reached(self, node: Node) -> bool:
        """``node`` takes part in the pass, as far as this worker found."""


class AllSends:
    """FAST: every send function of the context takes part, known from the start."""

    def takes_part(self, send: SendNode) -> bool:
        return True

    def all_fed(self, executed: set[int], context_sends: int) -> bool:
        return len(executed) >= context_sends  # the executed ones are the context's

    def reached(self, node: Node) -> bool:
        return True


class Mode(Protocol):
    """A distributed backward mode (see the module docstring)."""

    name: str
    discovers: bool

    def select_sends(self) -> SendSelection:
        """A new pass's selection of the sends that take part."""

    def count(self, task: GraphTask, selection: SendSelection, context_sends: list[SendNode],
              sources: Sequence[Node]) -> None:
        """Count the dependencies of a pass created on this worker (``sources``: its roots, at the root)."""

    def fed(self, task: GraphTask, send: SendNode) -> None:
        """A GRAD arrived for ``send``: count what it reaches if that was not counted yet."""

    def succeeded(self, *, root_unfed: bool, open_elsewhere: bool, marked_unfed: bool) -> bool:
        """The root's verdict once every task reported without error: ``root_unfed``: a send of
        the root that takes part got no gradient; ``open_elsewhere``: some other worker did not
        close the pass; ``marked_unfed``: a marked send got no gradient (SMART)."""


class FastMode:
    """FAST: every send function recorded in the context takes part."""

    name = "fast"
    discovers = False

    def select_sends(self) -> SendSelection:
        return AllSends()

    def count(self, task: GraphTask, selection: SendSelection, context_sends: list[SendNode],
              sources: Sequence[Node]) -> None:
        task.add_roots(context_sends)

    def fed(self, task: GraphTask, send: SendNode) -> None:
        """Counted when the pass was created here."""

    def succeeded(self, *, root_unfed: bool, open_elsewhere: bool, marked_unfed: bool) -> bool:
        return not root_unfed and not open_elsewhere


class SmartMode:
    """SMART: the send functions that take part are discovered while the pass runs
    (``dist/discovery.py``). ``sent`` is the engine's counter of messages sent, by kind."""

    name = "smart"
    discovers = True

    def __init__(self, sent: Counter[str]) -> None:
        self._sent = sent

    def select_sends(self) -> SendSelection:
        return Discovery()

    def count(self, task: GraphTask, selection: SendSelection, context_sends: list[SendNode],
              sources: Sequence[Node]) -> None:
        """Hold the nodes that several sources reach; the rest is counted when its source is known."""
        held = shared_nodes(list(sources) + context_sends)
        if held:
            task.hold(held)
            discovery_of(selection).held = True

    def fed(self, task: GraphTask, send: SendNode) -> None:
        task.add_roots([send])  # it takes part: count what it reaches

    def succeeded(self, *, root_unfed: bool, open_elsewhere: bool, marked_unfed: bool) -> bool:
        return not marked_unfed

    def message_count(self) -> int:
        """DISCOVER, DISCOVER_ACK and START messages this worker sent: what SMART costs over FAST."""
        return sum(self._sent[kind] for kind in DISCOVERY_KINDS)


MODE_NAMES = (FastMode.name, SmartMode.name)


def discovery_of(selection: SendSelection) -> Discovery:
    """The discovery state of a SMART pass.

    Raises:
        AutogradError: the pass runs in FAST mode (a SMART message for a FAST pass).
    """
    if not isinstance(selection, Discovery):
        raise AutogradError("a SMART-mode message arrived for a backward pass that runs in FAST mode")
    return selection
