"""The launcher's rendezvous as pure logic: rounds, ranks, restarts, verdicts, timeouts."""

from __future__ import annotations

from zgrad.launch.rendezvous import RendezvousHost, RendezvousSettings


def settings(**overrides) -> RendezvousSettings:
    values = dict(run_id="job", min_nodes=2, max_nodes=2, static=False, max_restarts=1, join_timeout_s=30.0,
                  last_call_timeout_s=5.0, node_timeout_s=10.0)
    values.update(overrides)
    return RendezvousSettings(**values)


def join(host: RendezvousHost, node: str, now: float, round_: int = 0, nproc: int = 2, node_rank: int = -1,
         run_id: str = "job") -> list:
    return host.handle(node.encode(), {"op": "join", "node": node, "run_id": run_id, "round": round_, "nproc": nproc,
                                       "node_rank": node_rank, "addr": f"10.0.0.{len(node)}", "ports": [100 + now, 200]},
                       now)


def ops(replies: list, node: str | None = None) -> list[str]:
    return [r["op"] for client, r in replies if node is None or client == node.encode()]


def rounds(replies: list) -> dict[str, dict]:
    return {client.decode(): r for client, r in replies if r["op"] == "round"}


def test_a_round_forms_when_every_node_joined_and_ranks_follow_the_join_order():
    host = RendezvousHost(settings())
    assert ops(join(host, "a", 0.0)) == ["waiting"]
    formed = rounds(join(host, "bb", 1.0, nproc=3))
    assert formed["a"]["group_rank"] == 0 and formed["bb"]["group_rank"] == 1
    assert formed["bb"]["rank_offset"] == 2 and formed["a"]["world_size"] == formed["bb"]["world_size"] == 5
    assert formed["a"]["master_addr"] == formed["bb"]["master_addr"] == "10.0.0.1"
    assert formed["a"]["master_port"] == 100.0  # the ports group rank 0 offered


def test_static_ranks_follow_node_rank_and_a_clash_is_refused():
    host = RendezvousHost(settings(static=True))
    join(host, "a", 0.0, node_rank=1)
    clash = join(host, "bb", 0.5, node_rank=1)
    assert ops(clash) == ["refused"] and "two nodes claim --node-rank 1" in clash[0][1]["reason"]
    formed = rounds(join(host, "bb", 1.0, node_rank=0))
    assert formed["bb"]["group_rank"] == 0 and formed["a"]["group_rank"] == 1


def test_another_run_id_is_refused_naming_both():
    host = RendezvousHost(settings())
    reply = join(host, "a", 0.0, run_id="other")
    assert ops(reply) == ["refused"] and "'job'" in reply[0][1]["reason"] and "'other'" in reply[0][1]["reason"]


def test_an_elastic_round_waits_for_the_last_call_then_starts_with_min_nodes():
    host = RendezvousHost(settings(min_nodes=1, max_nodes=3))
    assert ops(join(host, "a", 0.0)) == ["waiting"]
    assert host.tick(4.0) == []
    assert list(rounds(host.tick(5.5))) == ["a"]


def test_a_join_timeout_stops_every_joined_node_naming_how_many_came():
    host = RendezvousHost(settings(min_nodes=3, max_nodes=3))
    join(host, "a", 0.0)
    join(host, "bb", 1.0)
    stopped = host.tick(31.0)
    assert sorted(c for c, r in stopped if r["op"] == "stop") == [b"a", b"bb"]
    assert "2 of at least 3 node(s)" in stopped[0][1]["reason"]


def test_a_failure_restarts_every_node_then_exhausted_restarts_stop_them():
    host = RendezvousHost(settings(max_restarts=1))
    join(host, "a", 0.0)
    join(host, "bb", 0.0)
    failure = {"name": "default1", "exitcode": 1}
    replies = host.handle(b"bb", {"op": "beat", "node": "bb", "round": 0, "state": "failed", "failures": [failure]}, 1.0)
    assert sorted(ops(replies)) == ["restart", "restart"] and replies[0][1]["round"] == 1
    join(host, "a", 2.0, round_=1)
    formed = rounds(join(host, "bb", 2.0, round_=1))
    assert formed["a"]["restart_count"] == 1 and formed["a"]["round"] == 1
    replies = host.handle(b"a", {"op": "beat", "node": "a", "round": 1, "state": "failed", "failures": [failure]}, 3.0)
    assert sorted(ops(replies)) == ["stop", "stop"]
    assert replies[0][1]["failures"] == [failure, failure] and "no restarts left" in replies[0][1]["reason"]
    assert host.everyone_told()


def test_a_silent_node_fails_the_round():
    host = RendezvousHost(settings(max_restarts=0))
    join(host, "a", 0.0)
    join(host, "bb", 0.0)
    host.handle(b"a", {"op": "beat", "node": "a", "round": 0, "state": "running"}, 9.0)
    assert host.tick(9.5) == []
    stopped = host.tick(10.5)
    assert sorted(ops(stopped)) == ["stop", "stop"]
    assert stopped[0][1]["failures"][0]["node"] == "bb" and "stopped answering" in stopped[0][1]["failures"][0]["reason"]


def test_the_job_finishes_when_every_node_is_done():
    host = RendezvousHost(settings())
    join(host, "a", 0.0)
    join(host, "bb", 0.0)
    assert ops(host.handle(b"a", {"op": "beat", "node": "a", "round": 0, "state": "done"}, 1.0)) == ["ack"]
    assert sorted(ops(host.handle(b"bb", {"op": "beat", "node": "bb", "round": 0, "state": "done"}, 1.0))) == \
        ["finished", "finished"]


def test_a_node_arriving_during_a_round_joins_the_next_one():
    host = RendezvousHost(settings(min_nodes=1, max_nodes=2, last_call_timeout_s=0.0))
    assert list(rounds(join(host, "a", 0.0))) == ["a"]
    assert ops(join(host, "bb", 1.0)) == ["waiting"]
    replies = host.handle(b"a", {"op": "beat", "node": "a", "round": 0, "state": "failed", "failures": []}, 2.0)
    assert ops(replies) == ["restart"]
    formed = rounds(join(host, "a", 2.5, round_=1))
    assert sorted(formed) == ["a", "bb"] and formed["a"]["world_size"] == 4
