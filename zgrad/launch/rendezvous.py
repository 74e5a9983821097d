"""The launcher's rendezvous: which nodes form a round, their ranks, and the verdict on a round.

One agent hosts it (the one that could bind the rendezvous endpoint); every agent, the host's
own included, talks to it with the same messages. Pure logic: :meth:`RendezvousHost.handle`
and :meth:`RendezvousHost.tick` take the time and return the replies to send, so it is tested
without sockets. The messages (msgpack maps over ``zgrad.transport.control``)::

    agent -> host  join   {run_id, node, round, nproc, node_rank, addr, ports}
                   beat   {node, round, state: running|done|failed, failures}
                   leave  {node, round, reason}
    host -> agent  waiting {joined, min_nodes}      a join was counted; the round is not formed yet
                   round  {round, group_rank, group_world_size, rank_offset, world_size,
                           master_addr, master_port, pg_master_port, restart_count}
                   restart {round, failures}        stop your workers and join round ``round``
                   stop   {failures, reason}        the job failed for good: stop and exit non-zero
                   ack    {round}                   a beat of the running round arrived
                   finished {}                      every node's workers succeeded: exit 0
                   refused {reason}                 this agent cannot take part (and why)

A round forms when ``min_nodes`` agents joined and either ``max_nodes`` did or
``last_call_timeout_s`` passed since the ``min_nodes``-th; group ranks follow the static node
ranks, else the join order. The round's rendezvous ports for the workers are the ones group
rank 0 offered: each agent offers ports that are free on its host and were never offered
before by it, so no round reuses a dead round's address. A round fails when any node reports
a failure, leaves, or stops beating for ``node_timeout_s``; then, while restarts remain, every
agent joins the next round (nodes that were waiting join it too), else all are told to stop.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["RendezvousHost", "RendezvousSettings", "Reply"]

Reply = tuple[bytes, dict[str, Any]]


@dataclass(frozen=True)
class RendezvousSettings:
    """How a job's nodes gather.

    Attributes:
        run_id: the job's id; an agent with another one is refused.
        min_nodes, max_nodes: how many nodes a round needs and takes.
        static: node ranks are given (``--node-rank``) and the round needs exactly ``max_nodes``.
        max_restarts: rounds that may follow a failed one.
        join_timeout_s: how long a round may take to gather ``min_nodes``.
        last_call_timeout_s: how long to wait for more nodes once ``min_nodes`` joined.
        node_timeout_s: silence after which a node of a running round counts as dead.
    """

    run_id: str
    min_nodes: int
    max_nodes: int
    static: bool
    max_restarts: int
    join_timeout_s: float
    last_call_timeout_s: float
    node_timeout_s: float


@dataclass
class _Member:
    client: bytes
    join: dict[str, Any]
    last_heard_s: float
    state: str = "running"
    told: bool = False  # got the verdict of the round


@dataclass
class RendezvousHost:
    settings: RendezvousSettings
    round: int = 0
    restarts_used: int = 0
    phase: str = "gathering"  # gathering -> running -> (gathering ...) -> ended
    gather_started_s: float | None = None
    quorum_s: float | None = None
    joined: dict[str, _Member] = field(default_factory=dict)
    members: dict[str, _Member] = field(default_factory=dict)
    failures: list[dict[str, Any]] = field(default_factory=list)
    verdict: dict[str, Any] | None = None
    _round_reply: dict[str, dict[str, Any]] = field(default_factory=dict)

    def handle(self, client: bytes, message: dict[str, Any], now_s: float) -> list[Reply]:
        """Take one agent's message; return the replies it causes."""
        op = message.get("op")
        node = message.get("node")
        if not isinstance(node, str):
            return [(client, {"op": "refused", "reason": f"malformed rendezvous message (op {op!r}, no node id)"})]
        if op == "join":
            return self._join(client, node, message, now_s)
        member = self.members.get(node)
        if op == "beat" and member is not None:
            return self._beat(member, node, message, now_s)
        if op == "leave" and member is not None:
            member.last_heard_s = now_s
            if self.phase == "running" and message.get("round") == self.round:
                return self._round_failed([{"node": node, "reason": str(message.get("reason", "the agent left"))}], now_s)
            return []
        if op == "beat" and node in self.joined:
            self.joined[node].last_heard_s = now_s
            return [(client, self.verdict)] if self.verdict is not None else []
        if op == "beat" and self.verdict is not None:
            return [(client, self.verdict)]
        return []

    def _join(self, client: bytes, node: str, message: dict[str, Any], now_s: float) -> list[Reply]:
        settings = self.settings
        if message.get("run_id") != settings.run_id:
            return [(client, {"op": "refused", "reason": f"this rendezvous hosts run {settings.run_id!r}, not "
                                                         f"{message.get('run_id')!r} (--rdzv-id)"})]
        if self.verdict is not None:
            return [(client, self.verdict)]
        if node in self.members and self.phase == "running":
            reply = self._round_reply.get(node)
            return [(client, reply)] if reply and message.get("round") == self.round else []
        if settings.static:
            rank = message.get("node_rank")
            if not isinstance(rank, int) or not 0 <= rank < settings.max_nodes:
                return [(client, {"op": "refused", "reason": f"--node-rank {rank} is outside 0..{settings.max_nodes - 1} "
                                                             f"(--nnodes {settings.max_nodes})"})]
            clash = next((n for n, m in self.joined.items() if m.join.get("node_rank") == rank and n != node), None)
            if clash is not None:
                return [(client, {"op": "refused", "reason": f"two nodes claim --node-rank {rank}"})]
        if node not in self.joined and len(self.joined) >= settings.max_nodes:
            return [(client, {"op": "refused", "reason": f"the job is full: --nnodes allows at most {settings.max_nodes} node(s)"})]
        if self.gather_started_s is None:
            self.gather_started_s = now_s
        self.joined[node] = _Member(client, dict(message), now_s)
        if len(self.joined) >= settings.min_nodes and self.quorum_s is None:
            self.quorum_s = now_s
        replies = [(client, {"op": "waiting", "joined": len(self.joined), "min_nodes": settings.min_nodes})]
        if self.phase == "gathering":
            replies += self._maybe_form(now_s)
        return replies

    def _beat(self, member: _Member, node: str, message: dict[str, Any], now_s: float) -> list[Reply]:
        member.last_heard_s = now_s
        if self.verdict is not None:
            return self._tell(member)
        if message.get("round") != self.round or self.phase != "running":
            if self.verdict is not None or self.phase == "gathering":
                return self._tell(member)
            return []
        state = message.get("state")
        if state == "failed":
            member.state = "failed"
            failures = message.get("failures")
            return self._round_failed(failures if isinstance(failures, list) else [{"node": node}], now_s)
        if state == "done":
            member.state = "done"
            if all(m.state == "done" for m in self.members.values()):
                self.verdict = {"op": "finished"}
                self.phase = "ended"
                return [r for m in self.members.values() for r in self._tell(m)]
        return [(member.client, {"op": "ack", "round": self.round})]

    def _tell(self, member: _Member) -> list[Reply]:
        """The pending news for a member of the last running round (restart or verdict)."""
        if self.verdict is not None:
            member.told = True
            return [(member.client, self.verdict)]
        if self.phase == "gathering":
            return [(member.client, {"op": "restart", "round": self.round, "failures": self.failures[-8:]})]
        return []

    def _round_failed(self, failures: list[dict[str, Any]], now_s: float) -> list[Reply]:
        self.failures.extend(f for f in failures if isinstance(f, dict))
        if self.restarts_used >= self.settings.max_restarts:
            reason = (f"no restarts left (--max-restarts {self.settings.max_restarts})" if self.settings.max_restarts
                      else "restarts are off (--max-restarts 0)")
            self.verdict = {"op": "stop", "failures": self.failures, "reason": reason}
            self.phase = "ended"
        else:
            self.restarts_used += 1
            self.round += 1
            self.phase = "gathering"
            self.joined = {n: m for n, m in self.joined.items() if n not in self.members}
            self.gather_started_s, self.quorum_s = now_s, None
            if len(self.joined) >= self.settings.min_nodes:
                self.quorum_s = now_s
        return [r for m in self.members.values() for r in self._tell(m)]

    def tick(self, now_s: float) -> list[Reply]:
        """Time-driven steps: form a round after the last call, fail on a join timeout or a silent node."""
        if self.phase == "gathering":
            replies = self._maybe_form(now_s)
            if self.phase == "gathering" and self.gather_started_s is not None \
                    and now_s - self.gather_started_s > self.settings.join_timeout_s:
                reason = (f"rendezvous timed out: {len(self.joined)} of at least {self.settings.min_nodes} node(s) "
                          f"joined round {self.round} within join_timeout={self.settings.join_timeout_s:g} s")
                self.verdict = {"op": "stop", "failures": self.failures, "reason": reason}
                self.phase = "ended"
                replies += [(m.client, self.verdict) for m in self.joined.values()]
                replies += [r for m in self.members.values() for r in self._tell(m)]
            return replies
        if self.phase == "running":
            silent = [(n, m) for n, m in self.members.items()
                      if m.state != "done" and now_s - m.last_heard_s > self.settings.node_timeout_s]
            if silent:
                failures = [{"node": n, "host": m.join.get("addr"), "group_rank": m.join.get("group_rank"),
                             "reason": f"its agent stopped answering for {self.settings.node_timeout_s:g} s"}
                            for n, m in silent]
                return self._round_failed(failures, now_s)
        return []

    def _maybe_form(self, now_s: float) -> list[Reply]:
        settings = self.settings
        count = len(self.joined)
        if count < settings.min_nodes:
            return []
        if count < settings.max_nodes and (self.quorum_s is None or now_s - self.quorum_s < settings.last_call_timeout_s):
            return []
        if settings.static:
            order = sorted(self.joined.items(), key=lambda item: item[1].join["node_rank"])
        else:
            order = list(self.joined.items())
        first = order[0][1].join
        ports = list(first.get("ports") or [0, 0])
        world_size = sum(int(m.join.get("nproc", 0)) for _, m in order)
        replies: list[Reply] = []
        self.members, self._round_reply, offset = {}, {}, 0
        for group_rank, (node, member) in enumerate(order):
            member.state, member.last_heard_s, member.told = "running", now_s, False
            member.join["group_rank"] = group_rank
            reply = {"op": "round", "round": self.round, "group_rank": group_rank, "group_world_size": len(order),
                     "rank_offset": offset, "world_size": world_size, "master_addr": first.get("addr"),
                     "master_port": ports[0], "pg_master_port": ports[1], "restart_count": self.restarts_used}
            offset += int(member.join.get("nproc", 0))
            self.members[node] = member
            self._round_reply[node] = reply
            replies.append((member.client, reply))
        self.joined = {}
        self.phase = "running"
        self.gather_started_s = self.quorum_s = None
        return replies

    def abort(self, reason: str) -> list[Reply]:
        """End the job now (the hosting agent is going away): every node is told to stop."""
        if self.verdict is None:
            self.verdict = {"op": "stop", "failures": self.failures, "reason": reason}
            self.phase = "ended"
        return [(m.client, self.verdict) for m in self.joined.values()] + \
            [r for m in self.members.values() for r in self._tell(m)]

    def everyone_told(self) -> bool:
        """The job ended and every member of its last round has heard so."""
        return self.verdict is not None and all(m.told for m in self.members.values())
