"""Every shipped config parses, and config errors name the key, the value and what is allowed."""

from __future__ import annotations

from pathlib import Path

import pytest

from zgrad.config import Config, load_config
from zgrad.errors import ConfigError
from paths import CONFIGS as CONFIG_DIR

CONFIGS = sorted(CONFIG_DIR.glob("*.toml"))


def test_configs_are_shipped():
    assert CONFIGS, "configs/ holds no example"


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.name)
def test_shipped_config_parses(path: Path):
    cfg = load_config(path)
    assert isinstance(cfg, Config) and cfg.source == str(path)


def test_defaults_bind_loopback():
    assert load_config(None).transport.bind_address == "127.0.0.1"


@pytest.mark.parametrize(
    "raw, words",
    [
        ({"transport": {"hearbeat_timeout_s": 3}}, ["transport.hearbeat_timeout_s", "Did you mean 'heartbeat_timeout_s'"]),
        ({"engin": {"mode": "fast"}}, ["'engin'", "Did you mean 'engine'"]),
        ({"engine": {"mode": "smrat"}}, ["'engine.mode'", "'smrat'", "'fast'", "Did you mean 'smart'"]),
        ({"rpc": {"num_worker_threads": "8"}}, ["'rpc.num_worker_threads'", "'8'", "integer"]),
        ({"rpc": {"num_worker_threads": 0}}, ["'rpc.num_worker_threads'", "greater than 0"]),
        ({"security": {"curve": 1}}, ["'security.curve'", "true or false"]),
        ({"transport": {"heartbeat_interval_s": 5.0, "heartbeat_timeout_s": 2.0}}, ["heartbeat_timeout_s", "greater than"]),
        ({"workers": [{"name": "a"}, {"name": "a"}]}, ["workers[1].name", "unique"]),
        ({"workers": [{"host": "127.0.0.1"}]}, ["workers[0]", "missing required key", "name"]),
        ({"workers": [{"name": "a", "port": 70000}]}, ["workers[0].port", "65535"]),
        ({"rpc": {"codec": "pickle"}}, ["'rpc.codec'", "'pickle'", "'safe'"]),
        ({"rpc": {"allowed_modules": "mymodule"}}, ["'rpc.allowed_modules'", "list"]),
        ({"memory": {"keep_free_mb": 0}}, ["'memory.keep_free_mb'", "greater than 0"]),
        ({"transport": {"direct_max_kb": 0}}, ["'transport.direct_max_kb'", "greater than 0"]),
        ({"memory": {"tune_maloc": False}}, ["memory.tune_maloc", "Did you mean 'tune_malloc'"]),
        ({"ddp": {"master_port": 70000}}, ["'ddp.master_port'", "70000", "65535"]),
        ({"ddp": {"timeout_s": 0}}, ["'ddp.timeout_s'", "greater than 0"]),
        ({"ddp": {"chunk_kb": -1}}, ["'ddp.chunk_kb'", "greater than 0"]),
        ({"ddp": {"small_tensor_kb": -1}}, ["'ddp.small_tensor_kb'", "0 (always the ring) or a positive number"]),
    ],
)
def test_config_errors_name_key_value_and_fix(raw, words):
    with pytest.raises(ConfigError) as info:
        load_config(raw)
    for word in words:
        assert word in str(info.value)


def test_unreadable_and_invalid_files(tmp_path):
    with pytest.raises(ConfigError, match="cannot read config file"):
        load_config(tmp_path / "missing.toml")
    bad = tmp_path / "bad.toml"
    bad.write_text("[transport\nkind = 'tcp'\n")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_config(bad)
