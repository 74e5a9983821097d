"""The launcher's agent: one per node; owns its workers' lifecycle across rounds.

States, as torchelastic's agent: *joining* (rendezvous for a round), *healthy* (workers
running), *stopping* (a failure here or elsewhere), then either the next round (restarts left)
or the end (every node's workers succeeded, or the job failed for good). One loop, one thread:
it polls the workers' output pipes and the rendezvous sockets together, so no wait is longer
than the monitor interval and nothing else runs between fork and exec of a worker.

The rendezvous (:mod:`zgrad.launch.rendezvous`) lives in the agent that could bind its
endpoint; a one-node job without an endpoint keeps it in-process, with no socket at all.
"""

from __future__ import annotations

import errno
import os
import signal
import socket
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from zgrad.launch.rendezvous import RendezvousHost, RendezvousSettings
from zgrad.launch.workers import OutputPolicy, WorkerFailure, WorkerGroup, WorkerSpec
from zgrad.transport.control import AgentKeys, ControlClient, ControlPoller, ControlServer, local_address_towards

__all__ = ["AgentSpec", "Outcome", "RoundInfo", "run_agent"]


@dataclass(frozen=True)
class RoundInfo:
    """What the rendezvous decided for this node in one round."""

    round: int
    group_rank: int
    group_world_size: int
    rank_offset: int
    world_size: int
    master_addr: str
    master_port: int
    pg_master_port: int
    restart_count: int
    local_addr: str  # the address the other nodes reach this one at


@dataclass(frozen=True)
class AgentSpec:
    """One node's agent.

    Attributes:
        prog: the launcher's name, for messages.
        local_world_size: workers on this node.
        build_workers: the worker processes of a round.
        output: where their output goes in a round.
        settings: how the nodes gather and how often a job restarts.
        endpoint: the rendezvous (host, port), or None to keep it in this process (one node).
        node_rank: this node's rank for a static rendezvous, else -1.
        local_addr: the address other nodes reach this one at (None: found from the endpoint).
        monitor_interval_s: how often workers are checked.
        shutdown_grace_s: between SIGTERM and SIGKILL when workers are stopped.
        keep_alive_interval_s: how often the agent tells the rendezvous it is alive.
        keys: the agents' CURVE key pair, or None.
    """

    prog: str
    local_world_size: int
    build_workers: Callable[[RoundInfo], list[WorkerSpec]]
    output: Callable[[RoundInfo], OutputPolicy]
    settings: RendezvousSettings
    endpoint: tuple[str, int] | None = None
    node_rank: int = -1
    local_addr: str | None = None
    monitor_interval_s: float = 0.1
    shutdown_grace_s: float = 30.0
    keep_alive_interval_s: float = 1.0
    keys: AgentKeys | None = None


@dataclass(frozen=True)
class Outcome:
    """How the job ended for this node: ``code`` 0 (success), the signal the agent got
    (``signalled``), or the failures that ended it (``failures``, first one first) and why."""

    code: int
    failures: tuple[WorkerFailure | dict, ...] = ()
    reason: str = ""
    signalled: int | None = None


class _Signals:
    """SIGINT/SIGTERM/SIGHUP/SIGQUIT set a flag that the loop reads (handlers restored on exit)."""

    WATCHED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)

    def __init__(self) -> None:
        self.received: int | None = None
        self._previous = {s: signal.signal(s, self._on_signal) for s in self.WATCHED}

    def _on_signal(self, signum: int, frame: Any) -> None:
        if self.received is None:
            self.received = signum

    def restore(self) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)


class _Channel:
    """This agent's side of the rendezvous, and the rendezvous itself when this agent hosts it."""

    def __init__(self, spec: AgentSpec, poller: ControlPoller):
        self.node = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self.host: RendezvousHost | None = None
        self.server: ControlServer | None = None
        self.client: ControlClient | None = None
        self._inbox: list[dict] = []
        if spec.endpoint is None:
            self.host = RendezvousHost(spec.settings)
            self.addr = spec.local_addr or "127.0.0.1"
            return
        host, port = spec.endpoint
        try:
            self.server = ControlServer(_bind_address(host), port, spec.keys)
            self.host = RendezvousHost(spec.settings)
            port = self.server.port
        except OSError as exc:
            if exc.errno not in (errno.EADDRINUSE, errno.EADDRNOTAVAIL, errno.ENODEV):
                raise
        self.endpoint = (host, port)
        self.client = ControlClient(host, port, spec.keys)
        self.addr = spec.local_addr or local_address_towards(host, port)
        for item in (self.server, self.client):
            if item is not None:
                poller.register(item)

    def leave(self, round_: int, reason: str) -> None:
        """Tell the rendezvous this node is going; when it is hosted here, end the job for all."""
        self.send({"op": "leave", "round": round_, "reason": reason})
        if self.host is not None:
            self._dispatch(self.host.abort(f"the agent hosting the rendezvous stopped: {reason}"))

    def send(self, message: dict[str, Any]) -> None:
        message = {**message, "node": self.node}
        if self.client is None:
            self._inbox += [reply for _, reply in self.host.handle(b"", message, time.monotonic())]
        else:
            self.client.send(message)

    def receive(self) -> list[dict]:
        """Serve the rendezvous if hosted here; return the messages for this agent."""
        if self.host is not None:
            now = time.monotonic()
            incoming = self.server.receive(0) if self.server is not None else []
            replies = [r for client, message in incoming for r in self.host.handle(client, message, now)]
            self._dispatch(replies + self.host.tick(now))
        messages, self._inbox = self._inbox, []
        if self.client is not None:
            messages += self.client.receive(0)
        return messages

    def _dispatch(self, replies: list[tuple[bytes, dict]]) -> None:
        for client, reply in replies:
            if self.server is None:
                self._inbox.append(reply)
            else:
                self.server.send(client, reply)

    def close(self) -> None:
        for item in (self.client, self.server):
            if item is not None:
                item.close()


def _bind_address(host: str) -> str:
    try:
        return socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)[0][4][0]
    except socket.gaierror:
        return host


def _free_ports(addr: str, count: int, used: set[int]) -> list[int]:
    """Ports free on ``addr`` now, never handed out before by this agent."""
    ports: list[int] = []
    family = socket.AF_INET6 if ":" in addr else socket.AF_INET
    while len(ports) < count:
        with socket.socket(family, socket.SOCK_STREAM) as probe:
            try:
                probe.bind((addr, 0))
            except OSError:
                probe.bind(("", 0))
            port = probe.getsockname()[1]
        if port not in used:
            used.add(port)
            ports.append(port)
    return ports


class _Agent:
    def __init__(self, spec: AgentSpec):
        self.spec = spec
        self.poller = ControlPoller()
        self.channel = _Channel(spec, self.poller)
        self.signals = _Signals()
        self.used_ports: set[int] = set()
        self.group: WorkerGroup | None = None
        self.round = 0
        self.last_heard_s = time.monotonic()

    # -- the loop -------------------------------------------------------------------------------
    def run(self) -> Outcome:
        try:
            while True:
                info = self._join()
                if isinstance(info, Outcome):
                    return info
                outcome = self._run_round(info)
                if outcome is not None:
                    return outcome
        finally:
            if self.group is not None:
                self.group.kill()
            self._linger()
            self.channel.close()
            self.signals.restore()

    def _wait(self) -> list[dict]:
        """One turn: wait up to the monitor interval for output or messages; pump both."""
        ready = self.poller.poll(self.spec.monitor_interval_s)
        if self.group is not None:
            for fd in self.group.pump(ready):
                self.poller.unregister(fd)
        messages = self.channel.receive()
        if messages:
            self.last_heard_s = time.monotonic()
        return messages

    def _join(self) -> RoundInfo | Outcome:
        spec = self.spec
        ports = _free_ports(self.channel.addr, 2, self.used_ports)
        join = {"op": "join", "run_id": spec.settings.run_id, "round": self.round, "nproc": spec.local_world_size,
                "node_rank": spec.node_rank, "addr": self.channel.addr, "ports": ports}
        self.channel.send(join)
        started = last_beat = time.monotonic()
        answered = False
        while True:
            for message in self._wait():
                op = message.get("op")
                answered = True
                if op == "round":
                    self.round = int(message["round"])
                    return RoundInfo(**{k: message[k] for k in RoundInfo.__dataclass_fields__ if k != "local_addr"},
                                     local_addr=self.channel.addr)
                if op in ("stop", "refused", "finished"):
                    return self._verdict(message)
            if self.signals.received is not None:
                return self._signalled()
            now = time.monotonic()
            if now - last_beat >= spec.keep_alive_interval_s:
                self.channel.send({"op": "beat", "round": self.round, "state": "joining"})
                last_beat = now
            limit = spec.settings.join_timeout_s + spec.settings.node_timeout_s
            if now - started > limit:
                where = f"{self.channel.endpoint[0]}:{self.channel.endpoint[1]}" if self.channel.client else "here"
                what = "no rendezvous host answered" if not answered else "the rendezvous did not form a round"
                return Outcome(1, reason=f"{what} at {where} within {limit:g} s (join_timeout + keep-alive timeout)")

    def _run_round(self, info: RoundInfo) -> Outcome | None:
        """Run this node's workers for one round; None means: join the next round."""
        spec = self.spec
        self.group = WorkerGroup(spec.build_workers(info), spec.output(info))
        self.group.start()
        for fd in self.group.fds():
            self.poller.register(fd)
        state, last_beat = "running", 0.0
        self.last_heard_s = time.monotonic()
        while True:
            messages = self._wait()
            for message in messages:
                op = message.get("op")
                if op == "restart":
                    self._stop_workers()
                    self.round = int(message["round"])
                    return None
                if op in ("stop", "finished", "refused"):
                    self._stop_workers()
                    return self._verdict(message)
            if self.signals.received is not None:
                self._stop_workers()
                return self._signalled()
            now = time.monotonic()
            if state == "running":
                finished, failures = self.group.poll()
                if failures:
                    group = self.group
                    self._stop_workers()  # which reads the failed workers' pipes to their end
                    failures = group.failures()  # so their error lines are the traceback's last
                    state = "failed"
                    self.channel.send({"op": "beat", "round": self.round, "state": "failed",
                                       "failures": [f.as_map() for f in failures[:1]]})
                elif finished:
                    state = "done"
                    self.channel.send({"op": "beat", "round": self.round, "state": "done"})
            if now - last_beat >= spec.keep_alive_interval_s:
                self.channel.send({"op": "beat", "round": self.round, "state": state})
                last_beat = now
            if self.channel.client is not None and self.channel.host is None \
                    and now - self.last_heard_s > spec.settings.node_timeout_s:
                self._stop_workers()
                host, port = self.channel.endpoint
                return Outcome(1, reason=f"the rendezvous host at {host}:{port} stopped answering for "
                                         f"{spec.settings.node_timeout_s:g} s (its node died?)")

    def _signalled(self) -> Outcome:
        signum = self.signals.received
        self.channel.leave(self.round, f"the agent on {socket.gethostname()} received {signal.Signals(signum).name}")
        return Outcome(128 + signum, signalled=signum)

    def _stop_workers(self) -> None:
        if self.group is None:
            return
        for fd in self.group.fds():
            self.poller.unregister(fd)
        self.group.stop(self.spec.shutdown_grace_s)
        self.group.drain(1.0)
        self.group = None

    def _verdict(self, message: dict) -> Outcome:
        op = message.get("op")
        if op == "finished":
            return Outcome(0)
        if op == "refused":
            return Outcome(1, reason=f"the rendezvous refused this node: {message.get('reason')}")
        failures = tuple(WorkerFailure.from_map(f) if "exitcode" in f else f
                         for f in message.get("failures") or [] if isinstance(f, dict))
        return Outcome(1, failures=failures, reason=str(message.get("reason", "")))

    def _linger(self) -> None:
        """A hosting agent stays until every node heard the verdict (bounded by the keep-alive timeout)."""
        host = self.channel.host
        if host is None or self.channel.server is None:
            return
        deadline = time.monotonic() + self.spec.settings.node_timeout_s
        while not host.everyone_told() and time.monotonic() < deadline:
            self.poller.poll(self.spec.monitor_interval_s)
            self.channel.receive()


def run_agent(spec: AgentSpec) -> Outcome:
    """Run this node's part of the job to its end (blocks); never raises for a worker's failure."""
    return _Agent(spec).run()
