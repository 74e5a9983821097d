"""Job configuration: TOML file, dict, or environment, parsed once into frozen dataclasses.

Lower layers receive these typed objects, never raw dicts or ``os.environ``. Any unknown key,
wrong type or value outside its allowed set raises :class:`~zgrad.errors.ConfigError` naming the
key, the value received and what is allowed, with a close-match suggestion for typos.

Standard library only.
"""

from __future__ import annotations

import dataclasses
import difflib
import os
import tomllib
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from zgrad.errors import ConfigError

__all__ = [
    "with_launcher_address",
    "Config",
    "JobConfig",
    "RpcConfig",
    "TransportConfig",
    "EngineConfig",
    "SecurityConfig",
    "DdpConfig",
    "WorkerSpec",
    "load_config",
    "parse_config",
]


@dataclass(frozen=True)
class JobConfig:
    """``[job]``: what the launcher runs."""

    name: str = "zgrad-job"
    entry: str = ""
    args: tuple[str, ...] = ()


@dataclass(frozen=True)
class RpcConfig:
    """``[rpc]``: the RPC agent."""

    num_worker_threads: int = 16
    default_timeout_s: float = 60.0  # 0: calls have no timeout unless they give one
    allowed_modules: tuple[str, ...] = ()
    codec: Literal["safe"] = "safe"  # a pickle opt-in (CURVE-only) is not built yet
    shutdown_timeout_s: float = 0.0  # 0: no bound; dead workers end the barrier through heartbeats
    # peer name -> {this worker's device: the peer's device} for tensors sent there (PyTorch's
    # set_device_map; checked by zgrad/distributed/rpc/device_maps.py at init_rpc)
    device_maps: dict[str, dict[str, str]] = dataclasses.field(default_factory=dict)


@dataclass(frozen=True)
class TransportConfig:
    """``[transport]``: the ZeroMQ mesh (see ``docs/transport.md``).

    ``kind`` names a transport registered under the entry-point group ``zgrad.transports``
    (built-ins: ``tcp``, ``ipc``, ``inproc``). ``bind_address`` is where tcp workers listen
    (loopback unless set explicitly); ``advertise_address`` is the address peers dial when it
    differs (required when binding a wildcard such as ``0.0.0.0`` without ``[[workers]]`` hosts).
    ``high_water_mark`` bounds queued messages per peer, both in ZeroMQ and in front of it;
    ``send_timeout_s`` bounds how long a sender waits when a peer's queue is full.
    ``chunk_mb`` is the largest frame a buffer is cut into; ``recv_pool_mb`` is the memory kept
    for reassembling chunked buffers into reused pages. ``cma = "auto"`` sends each buffer of at
    least ``cma_min_kb`` to a peer on the same host by Linux cross-memory attach (the peer reads
    it from the sender's memory, one copy) wherever a start-up probe shows that works; ``"off"``
    always sends frames. A synchronous call (and the root's GRADs) carrying less than
    ``direct_max_kb`` of tensor data travels in frames on the calling thread's own socket (no
    hand-off, no single copy); a bigger one takes the link, where single copy applies. With
    ``direct_streams`` (and CURVE off) those sockets are plain TCP (Unix for ``ipc``) streams
    beside the ZeroMQ endpoint, which skip ZeroMQ's I/O threads; off, they are ZeroMQ DEALERs.
    """

    kind: str = "tcp"
    bind_address: str = "127.0.0.1"
    advertise_address: str = ""
    ipc_dir: str = ""
    connect_timeout_s: float = 30.0
    send_timeout_s: float = 30.0
    heartbeat_interval_s: float = 1.0
    heartbeat_timeout_s: float = 10.0
    high_water_mark: int = 1000
    max_message_mb: int = 2048
    chunk_mb: int = 16
    recv_pool_mb: int = 256
    cma: Literal["auto", "off"] = "auto"
    cma_min_kb: int = 256
    direct_max_kb: int = 1024
    direct_streams: bool = True
    inline_budget_ms: float = 5.0


@dataclass(frozen=True)
class EngineConfig:
    """``[engine]``: the distributed autograd engine.

    ``trace = true`` records every distributed backward pass of the job (as
    ``zgrad.distributed.autograd.trace`` does for a block); each worker that rooted passes writes
    their timeline to ``trace_file`` (``{worker}`` becomes its name) when it shuts down.
    """

    mode: Literal["fast", "smart"] = "fast"
    backward_timeout_s: float = 300.0
    trace: bool = False
    trace_file: str = "zgrad-trace-{worker}.json"


@dataclass(frozen=True)
class SecurityConfig:
    """``[security]``: CURVE encryption and authentication.

    With ``curve = true`` every worker loads its key pair ``worker-<rank>.key_secret`` and the
    public keys ``worker-<n>.key`` of all workers from ``key_dir`` (written by
    ``zgrad.transport.generate_keys``); only those public keys may connect.
    """

    curve: bool = False
    key_dir: str = ""


@dataclass(frozen=True)
class DdpConfig:
    """``[ddp]``: collectives (``init_process_group``) and data-parallel gradient reduction.

    ``bucket_cap_mb`` and ``find_unused_parameters`` are DDP's defaults when its constructor
    leaves them unset. ``timeout_s`` bounds one collective when ``init_process_group`` gives no
    timeout. ``master_port`` is where the process group's rank 0 listens under ``zgrad-launch``
    (0: a free port on one node; a job over several nodes must fix it). ``chunk_kb`` is the piece
    a ring collective pipelines (sending one while reducing the previous); tensors of at most
    ``small_tensor_kb`` take the latency-optimal path (every rank sends to every rank once).
    """

    bucket_cap_mb: float = 25.0
    find_unused_parameters: bool = False
    timeout_s: float = 1800.0
    master_port: int = 0
    chunk_kb: int = 4096
    small_tensor_kb: int = 1024


@dataclass(frozen=True)
class MemoryConfig:
    """``[memory]``: host memory of a worker process (see ``zgrad/kernels/host_memory.py``)."""

    tune_malloc: bool = True
    keep_free_mb: int = 256


@dataclass(frozen=True)
class WorkerSpec:
    """One ``[[workers]]`` entry: where a worker lives. ``port = 0`` picks a free port."""

    name: str
    host: str = "127.0.0.1"
    port: int = 0
    node: int = 0


@dataclass(frozen=True)
class Config:
    """The whole job configuration."""

    job: JobConfig = field(default_factory=JobConfig)
    rpc: RpcConfig = field(default_factory=RpcConfig)
    transport: TransportConfig = field(default_factory=TransportConfig)
    engine: EngineConfig = field(default_factory=EngineConfig)
    security: SecurityConfig = field(default_factory=SecurityConfig)
    ddp: DdpConfig = field(default_factory=DdpConfig)
    memory: MemoryConfig = field(default_factory=MemoryConfig)
    workers: tuple[WorkerSpec, ...] = ()
    source: str = "<defaults>"


_SECTIONS: dict[str, type] = {
    "job": JobConfig,
    "rpc": RpcConfig,
    "transport": TransportConfig,
    "engine": EngineConfig,
    "security": SecurityConfig,
    "ddp": DdpConfig,
    "memory": MemoryConfig,
}

_NON_NEGATIVE_FIELDS = {"rpc.shutdown_timeout_s", "rpc.default_timeout_s", "ddp.small_tensor_kb"}
_ZERO_MEANS = {"ddp.small_tensor_kb": "always the ring"}  # else 0 means no bound
_POSITIVE_FIELDS = {
    "rpc.num_worker_threads",
    "transport.connect_timeout_s",
    "transport.send_timeout_s",
    "transport.heartbeat_interval_s",
    "transport.heartbeat_timeout_s",
    "transport.high_water_mark",
    "transport.max_message_mb",
    "transport.chunk_mb",
    "transport.recv_pool_mb",
    "transport.cma_min_kb",
    "transport.direct_max_kb",
    "transport.inline_budget_ms",
    "engine.backward_timeout_s",
    "ddp.bucket_cap_mb",
    "ddp.timeout_s",
    "ddp.chunk_kb",
    "memory.keep_free_mb",
}


# A frame length travels as an unsigned 32-bit field of the transport header.
_MAX_CHUNK_MB = 1024


def _suggest(name: Any, choices: list[str]) -> str:
    close = difflib.get_close_matches(str(name), choices, n=1)
    return f" Did you mean {close[0]!r}?" if close else ""


def _unknown_key(where: str, key: str, allowed: list[str]) -> ConfigError:
    return ConfigError(
        f"unknown config key '{where}{key}'.{_suggest(key, allowed)} Allowed keys: {', '.join(sorted(allowed))}."
    )


def _type_name(tp: Any) -> str:
    return getattr(tp, "__name__", str(tp))


def _coerce(key: str, value: Any, tp: Any) -> Any:
    """Check ``value`` against annotation ``tp`` and return it in the field's type."""
    origin = typing.get_origin(tp)
    if origin is Literal:
        allowed = typing.get_args(tp)
        if value not in allowed:
            hint = _suggest(str(value), [str(a) for a in allowed])
            raise ConfigError(
                f"config key {key!r} got {value!r}; allowed values: {', '.join(map(repr, allowed))}.{hint}"
            )
        return value
    if origin is dict:
        key_tp, value_tp = typing.get_args(tp)
        if not isinstance(value, Mapping):
            raise ConfigError(f"config key {key!r} got {value!r} ({type(value).__name__}); expected a table")
        return {_coerce(f"{key} (a key)", k, key_tp): _coerce(f"{key}.{k}", v, value_tp) for k, v in value.items()}
    if origin is tuple:
        (item_tp, _) = typing.get_args(tp)
        if not isinstance(value, (list, tuple)):
            raise ConfigError(f"config key {key!r} got {value!r} ({type(value).__name__}); expected a list of {_type_name(item_tp)}")
        return tuple(_coerce(f"{key}[{i}]", v, item_tp) for i, v in enumerate(value))
    if tp is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"config key {key!r} got {value!r} ({type(value).__name__}); expected true or false")
        return value
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"config key {key!r} got {value!r} ({type(value).__name__}); expected an integer")
        return value
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f"config key {key!r} got {value!r} ({type(value).__name__}); expected a number")
        return float(value)
    if tp is str:
        if not isinstance(value, str):
            raise ConfigError(f"config key {key!r} got {value!r} ({type(value).__name__}); expected a string")
        return value
    raise ConfigError(f"config key {key!r}: unsupported field type {tp!r}")


def _build(cls: type, where: str, raw: Any) -> Any:
    if not isinstance(raw, Mapping):
        raise ConfigError(f"config section {where.rstrip('.')!r} must be a table, got {type(raw).__name__}")
    hints = typing.get_type_hints(cls)
    names = [f.name for f in dataclasses.fields(cls)]
    values = {}
    for key, value in raw.items():
        if key not in names:
            raise _unknown_key(where, key, names)
        full = f"{where}{key}"
        coerced = _coerce(full, value, hints[key])
        if full in _POSITIVE_FIELDS and coerced <= 0:
            raise ConfigError(f"config key {full!r} got {value!r}; expected a value greater than 0")
        if full in _NON_NEGATIVE_FIELDS and coerced < 0:
            zero = _ZERO_MEANS.get(full, "no bound")
            raise ConfigError(f"config key {full!r} got {value!r}; expected 0 ({zero}) or a positive number")
        values[key] = coerced
    try:
        return cls(**values)
    except TypeError as exc:
        missing = [f.name for f in dataclasses.fields(cls) if f.name not in values and f.default is dataclasses.MISSING]
        raise ConfigError(f"config section {where.rstrip('.')!r} is missing required key(s): {', '.join(missing)}") from exc


def _check_consistency(cfg: Config) -> None:
    t = cfg.transport
    if t.heartbeat_timeout_s <= t.heartbeat_interval_s:
        raise ConfigError(
            f"config key 'transport.heartbeat_timeout_s' ({t.heartbeat_timeout_s}) must be greater than "
            f"'transport.heartbeat_interval_s' ({t.heartbeat_interval_s})"
        )
    if t.chunk_mb > min(t.max_message_mb, _MAX_CHUNK_MB):
        raise ConfigError(
            f"config key 'transport.chunk_mb' got {t.chunk_mb}; expected at most "
            f"{min(t.max_message_mb, _MAX_CHUNK_MB)} (the smaller of 'transport.max_message_mb' and {_MAX_CHUNK_MB})"
        )
    if cfg.security.curve and not cfg.security.key_dir:
        raise ConfigError(
            "config key 'security.curve' = true requires 'security.key_dir': the directory of worker key "
            "files written by `zgrad-launch keygen --out DIR --workers N`"
        )
    if not 0 <= cfg.ddp.master_port <= 65535:
        raise ConfigError(f"config key 'ddp.master_port' got {cfg.ddp.master_port}; expected 0 (pick a free port) to 65535")
    seen: set[str] = set()
    for i, w in enumerate(cfg.workers):
        if w.name in seen:
            raise ConfigError(f"config key 'workers[{i}].name' repeats the worker name {w.name!r}; names must be unique")
        seen.add(w.name)
        if not 0 <= w.port <= 65535:
            raise ConfigError(f"config key 'workers[{i}].port' got {w.port}; expected 0 (pick a free port) to 65535")
        if w.node < 0:
            raise ConfigError(f"config key 'workers[{i}].node' got {w.node}; expected a node rank >= 0")


def parse_config(raw: Mapping[str, Any], source: str = "<dict>") -> Config:
    """Validate a mapping with the TOML's sections and return a :class:`Config`.

    Raises:
        ConfigError: an unknown section or key, a wrong type, or a value outside its allowed set.
    """
    if not isinstance(raw, Mapping):
        raise ConfigError(f"a config must be a table of sections, got {type(raw).__name__}")
    sections = {}
    workers: tuple[WorkerSpec, ...] = ()
    allowed_top = [*_SECTIONS, "workers"]
    for key, value in raw.items():
        if key == "workers":
            if not isinstance(value, list):
                raise ConfigError(f"config key 'workers' must be an array of tables ([[workers]]), got {type(value).__name__}")
            workers = tuple(_build(WorkerSpec, f"workers[{i}].", w) for i, w in enumerate(value))
        elif key in _SECTIONS:
            sections[key] = _build(_SECTIONS[key], f"{key}.", value)
        else:
            raise ConfigError(
                f"unknown config section {key!r}.{_suggest(key, allowed_top)} Allowed sections: {', '.join(allowed_top)}."
            )
    cfg = Config(**sections, workers=workers, source=source)
    _check_consistency(cfg)
    return cfg


def load_config(config: str | os.PathLike | Mapping[str, Any] | Config | None = None) -> Config:
    """Return a :class:`Config` from a TOML path, a dict of sections, a parsed config, or defaults.

    Raises:
        ConfigError: the file is missing, is not valid TOML, or fails validation.
    """
    if config is None:
        return Config()
    if isinstance(config, Config):
        return config
    if isinstance(config, Mapping):
        return parse_config(config)
    path = Path(config)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read config file {str(path)!r}: {exc.strerror or exc}") from exc
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"config file {str(path)!r} is not valid TOML: {exc}") from exc
    return parse_config(raw, source=str(path))


def with_launcher_address(config: Config, env: Mapping[str, str]) -> Config:
    """``config`` with ``transport.advertise_address`` taken from ``ZGRAD_ADVERTISE_ADDRESS`` (the
    address ``zgrad-run`` found this node at) when the config leaves it unset: a worker bound to
    every interface is then dialled at its node's address."""
    address = env.get("ZGRAD_ADVERTISE_ADDRESS", "")
    if not address or config.transport.advertise_address:
        return config
    return dataclasses.replace(config, transport=dataclasses.replace(config.transport, advertise_address=address))
