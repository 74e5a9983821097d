"""Where ``init_process_group`` takes what its caller left out, and the config of its mesh.

The process group runs a mesh of its own, beside the RPC agent's (PyTorch's ``ddp_rpc`` example
starts both in one process), over the same transport and settings, but at its own endpoints:
the job name gets a ``-pg`` suffix (ipc socket files, inproc endpoints), tcp ranks other than 0
bind any free port, and rank 0 listens at the process group's master port.

=============================  ===========================================================
source, first found wins       gives
=============================  ===========================================================
``init_method="tcp://h:p"``    rank 0's host and port (``?rank=R&world_size=N`` too)
``ZGRAD_PG_MASTER_ADDR/PORT``  the same, set by ``zgrad-launch``
``MASTER_ADDR``/``MASTER_PORT``  the same (torchrun's ``env://``)
``[ddp] master_port``          the port, at ``[[workers]]`` 0's host (else 127.0.0.1)
arguments, ``ZGRAD_RANK``,     rank and world size (else the config's ``[[workers]]``)
``RANK``, ``ZGRAD_WORLD_SIZE``,
``WORLD_SIZE``
``ZGRAD_CONFIG``               the config, when none is given
=============================  ===========================================================

This module is the only place of the collectives that reads ``os.environ``.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import os
import urllib.parse
from collections.abc import Mapping
from typing import Any

from zgrad.config import Config, load_config, with_launcher_address
from zgrad.distributed.identity import thread_identity
from zgrad.distributed.collectives.work import timeout_seconds
from zgrad.errors import ConfigError

__all__ = ["PgPlan", "resolve_pg_init", "BACKENDS", "debug_detail"]

log = logging.getLogger("zgrad.collectives")

BACKENDS = ("zmq", "gloo", "nccl", "mpi")


@dataclasses.dataclass(frozen=True)
class PgPlan:
    """Everything a rank needs to join the process group."""

    rank: int
    world_size: int
    name: str
    config: Config  # the job's
    mesh_config: Config  # the job's, at the process group's own endpoints
    master_addr: str | None
    master_port: int | None
    timeout_s: float


def check_backend(backend: Any) -> None:
    """Accept zgrad's backend and PyTorch's names for theirs (run by zgrad's, logged once).

    Raises:
        ValueError: an unknown backend name.
    """
    if backend is None:
        return
    names = [part.split(":")[-1].strip().lower() for part in str(backend).split(",")]
    unknown = [n for n in names if n not in BACKENDS]
    if unknown:
        raise ValueError(f"Invalid backend: {backend!r}; zgrad's process group runs over its ZeroMQ mesh "
                         f"(backend 'zmq'; {', '.join(BACKENDS[1:])} are accepted as names for it)")
    for name in names:
        if name != "zmq":
            _note_backend(name)


@functools.cache
def _note_backend(name: str) -> None:
    """Say once per process that PyTorch's backend ``name`` runs as zgrad's."""
    log.info("init_process_group: backend %r runs as zgrad's 'zmq' backend (the ZeroMQ mesh)", name)


def _env_int(env: Mapping[str, str], *names: str) -> int | None:
    for name in names:
        raw = env.get(name)
        if raw:
            try:
                return int(raw)
            except ValueError:
                raise ConfigError(f"environment variable {name}={raw!r} is not an integer") from None
    return None


def _parse_init_method(init_method: str | None) -> tuple[str | None, int | None, dict[str, str]]:
    if init_method is None or init_method == "env://":
        return None, None, {}
    url = urllib.parse.urlparse(init_method)
    query = dict(urllib.parse.parse_qsl(url.query))
    if url.scheme == "env":
        return None, None, query
    if url.scheme != "tcp" or not url.hostname or not url.port:
        raise ValueError(f"init_method {init_method!r} is not supported: use 'env://' or 'tcp://host:port'")
    return url.hostname, url.port, query


def resolve_pg_init(init_method: str | None, timeout: Any, world_size: int, rank: int, config: Any,
                    env: Mapping[str, str] | None = None) -> PgPlan:
    """Fill in rank, world size, rendezvous and config from arguments, then the environment.

    Raises:
        ConfigError: a value is missing everywhere, or values disagree.
        ValueError: an unsupported ``init_method``.
    """
    env = os.environ if env is None else env
    me = thread_identity()  # a worker thread of an inproc job: the runner said who it is
    if me is not None:
        rank = rank if rank is not None and rank >= 0 else me.rank
        world_size = world_size if world_size is not None and world_size >= 0 else me.world_size
        config = config if config is not None else me.config
    if config is None:
        config = load_config(env.get("ZGRAD_CONFIG") or None)
    else:
        config = load_config(config)
    config = with_launcher_address(config, env)
    host, port, query = _parse_init_method(init_method)
    if rank is None or rank < 0:
        rank = int(query["rank"]) if "rank" in query else _env_int(env, "ZGRAD_RANK", "RANK")
    if world_size is None or world_size < 0:
        world_size = int(query["world_size"]) if "world_size" in query else _env_int(env, "ZGRAD_WORLD_SIZE", "WORLD_SIZE")
    if world_size is None and config.workers:
        world_size = len(config.workers)
    if rank is None or world_size is None:
        raise ConfigError("init_process_group needs a rank and a world size: pass rank= and world_size=, use "
                          "init_method='tcp://host:port?rank=R&world_size=N', set RANK and WORLD_SIZE (or ZGRAD_RANK "
                          "and ZGRAD_WORLD_SIZE), or start the job with zgrad-launch")
    if world_size <= 0 or not 0 <= rank < world_size:
        raise ConfigError(f"rank {rank} is not valid for world_size {world_size}: expected 0 <= rank < world_size")
    workers = config.workers
    if workers and len(workers) != world_size:
        raise ConfigError(f"world_size {world_size} does not match the {len(workers)} [[workers]] of config {config.source}")
    if host is None:
        host = env.get("ZGRAD_PG_MASTER_ADDR") or env.get("MASTER_ADDR") or (workers[0].host if workers else None)
    if port is None:
        port = _env_int(env, "ZGRAD_PG_MASTER_PORT", "MASTER_PORT") or config.ddp.master_port or None
    if config.transport.kind == "tcp" and world_size > 1 and port is None:
        raise ConfigError("init_process_group over tcp needs rank 0's address: pass init_method='tcp://host:port', set "
                          "MASTER_ADDR and MASTER_PORT, set [ddp] master_port, or start the job with zgrad-launch")
    name = workers[rank].name if workers else f"rank{rank}"
    mesh_config = dataclasses.replace(
        config,
        job=dataclasses.replace(config.job, name=f"{config.job.name}-pg"),
        workers=tuple(dataclasses.replace(w, port=0) for w in workers),
    )
    timeout_s = timeout_seconds(timeout)
    return PgPlan(rank, world_size, name, config, mesh_config, host or "127.0.0.1", port,
                  config.ddp.timeout_s if timeout_s is None else timeout_s)


def debug_detail(env: Mapping[str, str] | None = None) -> bool:
    """Whether ``TORCH_DISTRIBUTED_DEBUG`` or ``ZGRAD_DISTRIBUTED_DEBUG`` asks for details (INFO or
    DETAIL, as PyTorch reads it): DDP's errors then name parameters, not only their indices."""
    env = os.environ if env is None else env
    return any(env.get(name, "").upper() in ("INFO", "DETAIL") for name in ("ZGRAD_DISTRIBUTED_DEBUG", "TORCH_DISTRIBUTED_DEBUG"))


def launched_by_torchelastic(env: Mapping[str, str] | None = None) -> bool:
    """Whether ``TORCHELASTIC_RUN_ID`` is set (``zgrad-run`` and torchrun set it in every worker)."""
    return (os.environ if env is None else env).get("TORCHELASTIC_RUN_ID") is not None
