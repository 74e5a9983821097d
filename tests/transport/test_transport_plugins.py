"""Transport plugins: the registry finds a third-party transport through its entry point."""

from __future__ import annotations

import queue

import pytest
from transport_world import start_all

from zgrad.config import load_config
from zgrad.errors import ConfigError, TransportError
from zgrad.transport import (
    ENTRY_POINT_GROUP,
    TransportRegistry,
    available_transports,
    create_mesh,
    get_transport,
)
from zgrad.transport.builtin import InprocTransport, IpcTransport, TcpTransport
from paths import SUPPORT

PLUGINS = SUPPORT / "plugins"


@pytest.fixture
def plugin_path(monkeypatch):
    monkeypatch.syspath_prepend(str(PLUGINS))


def test_builtins_are_always_available():
    assert {"tcp", "ipc", "inproc"} <= set(available_transports())
    assert isinstance(get_transport("tcp"), TcpTransport)
    assert isinstance(get_transport("ipc"), IpcTransport)
    assert get_transport("inproc") is get_transport("inproc")  # one owner of the shared context
    assert isinstance(get_transport("inproc"), InprocTransport)


@pytest.mark.timeout(30)
def test_a_config_selects_the_plugin_transport(plugin_path):
    assert "test-tcp" in available_transports()
    config = load_config(PLUGINS / "plugin_transport.toml")
    assert config.transport.kind == "test-tcp"
    inbox: queue.SimpleQueue = queue.SimpleQueue()
    rank0 = create_mesh(config, 0, 2, "a", on_message=inbox.put, on_peer_lost=print, valid_kinds={1})
    port = int(rank0.bind().rsplit(":", 1)[1])
    rank1 = create_mesh(config, 1, 2, "b", on_message=inbox.put, on_peer_lost=print, valid_kinds={1},
                        master_addr="127.0.0.1", master_port=port)
    try:
        start_all([rank0, rank1])
        rank1.send(0, 1, 42, "over the plugin")
        assert inbox.get(timeout=10).meta == "over the plugin"
        plugin = get_transport("test-tcp")
        assert type(plugin).__module__ == "zgrad_test_transport" and len(plugin.bound) >= 2
    finally:
        rank1.close()
        rank0.close()


def test_unknown_names_list_the_known_ones(plugin_path):
    with pytest.raises(ConfigError) as info:
        get_transport("tpc")
    message = str(info.value)
    assert "'tpc'" in message and "inproc, ipc, tcp, test-tcp" in message and ENTRY_POINT_GROUP in message


def test_broken_plugins_fail_with_the_entry_point_named(plugin_path):
    registry = TransportRegistry(group="zgrad.test_broken_transports")
    assert {"missing", "not-a-transport"} <= set(registry.available())
    with pytest.raises(TransportError, match="'missing'.*failed to load"):
        registry.get("missing")
    with pytest.raises(TransportError, match="not a subclass of zgrad.transport.Transport"):
        registry.get("not-a-transport")
