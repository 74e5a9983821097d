"""Where ``init_rpc`` takes what its caller left out: ``ZGRAD_*`` variables, then torchrun's.

==========================  ================================================================
variable                    meaning
==========================  ================================================================
``ZGRAD_RANK``              this worker's rank (``RANK`` as torchrun's fallback)
``ZGRAD_WORLD_SIZE``        number of workers (``WORLD_SIZE``)
``ZGRAD_WORKER_NAME``       this worker's name, when ``init_rpc`` is given none
``ZGRAD_CONFIG``            path of the job's TOML config
``ZGRAD_MASTER_ADDR``       host of rank 0 for rendezvous (``MASTER_ADDR``)
``ZGRAD_MASTER_PORT``       port of rank 0 for rendezvous (``MASTER_PORT``)
==========================  ================================================================

This module is the only place in the RPC layer that reads ``os.environ``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Mapping

from zgrad.config import Config, load_config, with_launcher_address
from zgrad.distributed.identity import thread_identity
from zgrad.distributed.rpc.options import TensorPipeRpcBackendOptions, apply_backend_options, rendezvous_of
from zgrad.errors import ConfigError

__all__ = ["InitPlan", "resolve_init"]


@dataclass(frozen=True)
class InitPlan:
    """Everything a worker needs to join the mesh."""

    name: str
    rank: int
    world_size: int
    config: Config
    master_addr: str | None
    master_port: int | None


def _env_int(env: Mapping[str, str], *names: str) -> int | None:
    for name in names:
        raw = env.get(name)
        if raw is None or raw == "":
            continue
        try:
            return int(raw)
        except ValueError:
            raise ConfigError(f"environment variable {name}={raw!r} is not an integer") from None
    return None


def _env_str(env: Mapping[str, str], *names: str) -> str | None:
    for name in names:
        raw = env.get(name)
        if raw:
            return raw
    return None


def resolve_init(name: str | None, rank: int | None, world_size: int | None, config: Any,
                 env: Mapping[str, str] | None = None, options: TensorPipeRpcBackendOptions | None = None) -> InitPlan:
    """Fill in the worker's identity and rendezvous from arguments, config, then environment.

    With ``[[workers]]`` in the config, a missing rank is found by name and the world size is
    the number of workers. PyTorch's ``rpc_backend_options`` (``options``) override the config's
    thread count and timeout, and their ``init_method = "tcp://host:port"`` the environment's
    rendezvous address. A negative rank (PyTorch's default -1) counts as not given.

    Raises:
        ConfigError: a value is missing everywhere, or values disagree.
    """
    env = os.environ if env is None else env
    me = thread_identity()  # a worker thread of an inproc job: the runner said who it is
    if me is not None:
        name = name if name is not None else me.name
        rank = rank if rank is not None and rank >= 0 else me.rank
        world_size = world_size if world_size is not None else me.world_size
        config = config if config is not None else me.config
    if config is None:
        path = _env_str(env, "ZGRAD_CONFIG")
        config = load_config(path) if path else load_config(None)
    else:
        config = load_config(config)
    config = with_launcher_address(apply_backend_options(config, options), env)
    if rank is not None and rank < 0:
        rank = None
    name = name or _env_str(env, "ZGRAD_WORKER_NAME")
    names = [w.name for w in config.workers]
    if rank is None:
        rank = _env_int(env, "ZGRAD_RANK", "RANK")
    if rank is None and name is not None and name in names:
        rank = names.index(name)
    if world_size is None:
        world_size = _env_int(env, "ZGRAD_WORLD_SIZE", "WORLD_SIZE")
    if world_size is None and names:
        world_size = len(names)
    if rank is None or world_size is None:
        raise ConfigError(
            "init_rpc needs a rank and a world size: pass rank= and world_size=, list the workers in the "
            "config's [[workers]], or set ZGRAD_RANK/ZGRAD_WORLD_SIZE (or torchrun's RANK/WORLD_SIZE)"
        )
    if world_size <= 0 or not 0 <= rank < world_size:
        raise ConfigError(f"rank {rank} is not valid for world_size {world_size}: expected 0 <= rank < world_size")
    if names:
        if len(names) != world_size:
            raise ConfigError(f"world_size {world_size} does not match the {len(names)} [[workers]] of config {config.source}")
        if name is None:
            name = names[rank]
        elif names[rank] != name:
            raise ConfigError(f"worker name {name!r} does not match [[workers]] entry {rank} ({names[rank]!r}) of {config.source}")
    if not name:
        raise ConfigError("init_rpc needs a worker name: pass name=, or set ZGRAD_WORKER_NAME")
    master_addr = _env_str(env, "ZGRAD_MASTER_ADDR", "MASTER_ADDR")
    master_port = _env_int(env, "ZGRAD_MASTER_PORT", "MASTER_PORT")
    rendezvous = rendezvous_of(options)
    if rendezvous is not None:
        master_addr, master_port = rendezvous
    return InitPlan(name, rank, world_size, config, master_addr, master_port)
