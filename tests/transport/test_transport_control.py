"""The launcher agents' control channel: maps in, maps out, malformed input dropped, CURVE keeps
out a client without the agents' key pair."""

from __future__ import annotations

import time

import msgpack
import zmq

from zgrad.transport import generate_keys
from zgrad.transport.control import ControlClient, ControlPoller, ControlServer, load_agent_keys


def receive_within(server: ControlServer, timeout_s: float) -> list:
    deadline, got = time.monotonic() + timeout_s, []
    while not got and time.monotonic() < deadline:
        got = server.receive(0.05)
    return got


def test_maps_go_both_ways_and_malformed_messages_are_dropped():
    server = ControlServer("127.0.0.1", 0)
    client = ControlClient("127.0.0.1", server.port)
    raw = zmq.Context.instance().socket(zmq.DEALER)
    raw.setsockopt(zmq.LINGER, 0)
    try:
        raw.connect(f"tcp://127.0.0.1:{server.port}")
        raw.send(b"\xc1 not msgpack")
        raw.send(msgpack.packb([1, 2]))  # not a map
        client.send({"op": "join", "nproc": 2})
        got = receive_within(server, 10.0)
        assert [message for _, message in got] == [{"op": "join", "nproc": 2}]
        server.send(got[0][0], {"op": "round", "round": 0})
        poller = ControlPoller()
        poller.register(client)
        assert poller.poll(10.0) == {-1}
        assert client.receive(0) == [{"op": "round", "round": 0}]
    finally:
        raw.close()
        client.close()
        server.close()


def test_curve_admits_the_agents_key_pair_only(tmp_path):
    generate_keys(tmp_path / "job", 1)
    generate_keys(tmp_path / "other", 1)
    keys, stranger_keys = load_agent_keys(tmp_path / "job"), load_agent_keys(tmp_path / "other")
    server = ControlServer("127.0.0.1", 0, keys)
    stranger = ControlClient("127.0.0.1", server.port, stranger_keys)
    plain = ControlClient("127.0.0.1", server.port)
    member = ControlClient("127.0.0.1", server.port, keys)
    try:
        stranger.send({"op": "join", "who": "stranger"})
        plain.send({"op": "join", "who": "plain"})
        member.send({"op": "join", "who": "member"})
        got = receive_within(server, 10.0)
        got += server.receive(1.0)
        assert [message["who"] for _, message in got] == ["member"]
    finally:
        for end in (stranger, plain, member, server):
            end.close()


def test_a_missing_agent_key_names_the_file_and_the_fix(tmp_path):
    import pytest

    from zgrad.errors import ConfigError

    with pytest.raises(ConfigError, match=r"agent\.key_secret.*zgrad-launch keygen --out"):
        load_agent_keys(tmp_path)


class _RefusingSocket:
    """A client socket that has no way to the server for its first ``refusals`` sends (between
    reconnects after a refused handshake, or with a full queue)."""

    def __init__(self, socket: zmq.Socket, refusals: int):
        self._socket, self.refusals = socket, refusals

    def send(self, data: bytes, flags: int = 0) -> None:
        if self.refusals:
            self.refusals -= 1
            raise zmq.Again()
        self._socket.send(data, flags)

    def __getattr__(self, name: str):
        return getattr(self._socket, name)


def test_a_message_the_socket_cannot_take_yet_goes_out_later_in_order():
    server = ControlServer("127.0.0.1", 0)
    client = ControlClient("127.0.0.1", server.port)
    real = client.socket
    client.socket = _RefusingSocket(real, refusals=3)
    try:
        client.send({"op": "join", "n": 1})  # refused: kept
        client.send({"op": "beat", "n": 2})  # refused: kept behind the first
        assert [message for _, message in server.receive(0.3)] == []
        client.receive(0)  # refused once more
        client.receive(0)  # both go out
        got, deadline = [], time.monotonic() + 10.0
        while len(got) < 2 and time.monotonic() < deadline:
            got += server.receive(0.05)
        assert [message["n"] for _, message in got] == [1, 2]
    finally:
        client.socket = real
        client.close()
        server.close()
