"""The I/O role (leader/follower) alone: a queue stands in for the inbound socket."""

from __future__ import annotations

import logging
import queue
import threading
import time

import pytest

from zgrad.transport.loop.role import IoRole

pytestmark = pytest.mark.timeout(30)
BUDGET_S = 0.005


class FakeLoop:
    """Leads by taking one task at a time from ``inbox`` and running it as a handler, which allows
    a take-over at once (``allow_at_once``, as a call with nothing to order) or when it says so."""

    def __init__(self, max_in_handlers: int = 16, allow_at_once: bool = True) -> None:
        self.allow_at_once = allow_at_once
        self.inbox: queue.SimpleQueue = queue.SimpleQueue()
        self.leaders: list[int | None] = []
        self.role = IoRole("test-role", self.lead, BUDGET_S, max_in_handlers, None, self.leaders.append,
                           logging.getLogger("test"))

    def lead(self) -> bool:
        while True:
            try:
                task = self.inbox.get(timeout=0.05)
            except queue.Empty:
                continue
            if task is None:
                return True
            self.role.begin_handler(time.monotonic())
            try:
                if self.allow_at_once:
                    self.role.allow_takeover()
                task()
            finally:
                still = self.role.end_handler()
            if not still:
                return False

    def __enter__(self) -> "FakeLoop":
        self.role.start(self.lead)
        return self

    def __exit__(self, *exc: object) -> None:
        self.inbox.put(None)
        assert not self.role.join(5.0)


def test_a_handler_that_runs_long_is_taken_over():
    long_thread, quick_thread, quick_done = [], [], threading.Event()
    with FakeLoop() as loop:
        loop.inbox.put(lambda: (long_thread.append(threading.get_ident()), time.sleep(0.5)))
        time.sleep(0.05)
        start = time.monotonic()
        loop.inbox.put(lambda: (quick_thread.append(threading.get_ident()), quick_done.set()))
        assert quick_done.wait(5)
        assert time.monotonic() - start < 0.3  # not after the 0.5 s handler
        assert quick_thread != long_thread and loop.role.takeovers == 1


def test_a_handler_is_not_taken_over_before_it_allows_it_so_the_next_waits_for_that_point():
    # The first handler stands for one whose thread is descheduled for 0.3 s (60 budgets) before it
    # registers what the next message refers to: the next one must not start before that point,
    # and may start (on the standby, which takes over) once the handler allowed it.
    events = []
    second_done = threading.Event()
    with FakeLoop(allow_at_once=False) as loop:
        def first():
            time.sleep(0.3)
            events.append("first: ordered part done")
            loop.role.allow_takeover()
            assert second_done.wait(5), "no take-over after allow_takeover"
            events.append("first: done")

        loop.inbox.put(first)
        loop.inbox.put(lambda: (events.append("second"), second_done.set()))
        deadline = time.monotonic() + 5
        while len(events) < 3 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert events == ["first: ordered part done", "second", "first: done"]
        assert loop.role.takeovers == 1


def test_allow_takeover_outside_a_handler_or_off_the_leader_does_nothing():
    role = IoRole("test-role", lambda: True, BUDGET_S, 16, None, lambda ident: None, logging.getLogger("test"))
    role.allow_takeover()  # no leader, no handler
    assert role.busy_since_s is None


def test_a_handler_about_to_block_hands_the_role_on():
    released = threading.Event()

    def blocks():
        loop.role.hand_off()
        assert released.wait(5)  # set by the next task, which another thread runs meanwhile

    with FakeLoop() as loop:
        loop.role._budget_s = 60.0  # no take-over: only the hand-off can let the next task run
        loop.inbox.put(blocks)
        loop.inbox.put(released.set)
        assert released.wait(5)
        assert loop.role.handoffs == 1 and loop.role.takeovers == 0


def test_no_take_over_beyond_max_in_handlers():
    gate = threading.Event()
    ran = []
    with FakeLoop(max_in_handlers=1) as loop:
        loop.inbox.put(lambda: gate.wait(5))
        loop.inbox.put(lambda: gate.wait(5))
        loop.inbox.put(lambda: ran.append(1))
        time.sleep(0.3)
        assert loop.role.takeovers == 1 and ran == []  # the second blocked handler holds the leader
        gate.set()
        deadline = time.monotonic() + 5
        while not ran and time.monotonic() < deadline:
            time.sleep(0.01)
        assert ran == [1]


def test_the_watcher_sleeps_untimed_once_handlers_stop():
    with FakeLoop() as loop:
        done = threading.Event()
        loop.inbox.put(done.set)
        assert done.wait(5)
        deadline = time.monotonic() + 5
        while not loop.role._watch_asleep and time.monotonic() < deadline:
            time.sleep(0.05)
        assert loop.role._watch_asleep  # no more looks until the next handler starts
        woke = threading.Event()
        loop.inbox.put(lambda: time.sleep(0.2))
        loop.inbox.put(woke.set)
        assert woke.wait(5) and loop.role.takeovers == 1


def run_times(loop, tasks, timeout_s=10.0):
    """Queue ``tasks`` (each ``(name, seconds to block)``); return when each finished, by name."""
    start, done, finished = time.monotonic(), {}, threading.Event()

    def task(name, seconds):
        time.sleep(seconds)
        done[name] = time.monotonic() - start
        if len(done) == len(tasks):
            finished.set()

    for name, seconds in tasks:
        loop.inbox.put(lambda n=name, s=seconds: task(n, s))
    assert finished.wait(timeout_s)
    return done


def test_a_taken_over_leader_finishing_its_handler_leaves_the_new_leaders_alone():
    # A (0.4 s) is taken over at 0.2 s; B starts on the new leader at 0.3 s and blocks 1.5 s; when
    # A ends at 0.4 s it must not make B look idle, or C would wait for B instead of a take-over.
    with FakeLoop() as loop:
        loop.role._budget_s = 0.2
        loop.inbox.put(lambda: time.sleep(0.4))
        time.sleep(0.3)
        done = run_times(loop, [("B", 1.5), ("C", 0.0)])
        assert done["C"] < 0.7 and loop.role.takeovers == 2


def test_the_next_standby_watches_when_the_watcher_leaves():
    with FakeLoop() as loop:
        run_times(loop, [("A", 0.2)])  # a take-over; A's thread then waits as a second standby
        time.sleep(0.3)
        released = threading.Event()

        def hands_off():
            loop.role.hand_off()  # the watcher leads now; A's thread, asleep as a standby, must watch
            assert released.wait(5)

        loop.inbox.put(hands_off)
        done = run_times(loop, [("C", 1.5), ("D", 0.0)])
        released.set()
        assert done["D"] < 0.8  # C was taken over


def test_join_waits_for_the_thread_that_ended_the_loop_and_for_a_standby_not_yet_started():
    # A mesh's close() returns after join: no thread of the role may outlive it. Under load the
    # thread that ran the last turn is still leaving, and the first standby may not have reached
    # its wait yet (here: slowed down at its start).
    def on_thread_start():
        if threading.current_thread().name.endswith("-2"):
            time.sleep(0.3)

    role = IoRole("test-join", lambda: True, BUDGET_S, 16, on_thread_start, lambda leader: None,
                  logging.getLogger("test"))
    first = role.start(lambda: True)  # the loop is over at once
    assert role.join(5.0) == []
    leftover = [t.name for t in threading.enumerate() if t.name.startswith("test-join")]
    assert leftover == [] and not first.is_alive()
