"""``zgrad-run`` (``python -m zgrad.distributed.run``): torchrun's command line on zgrad's agent.

Usage, as torchrun's::

    zgrad-run --standalone --nproc-per-node 4 train.py --epochs 3
    zgrad-run --nnodes 2 --nproc-per-node 2 --rdzv-backend c10d --rdzv-endpoint node0:29400 train.py
    zgrad-run --nnodes 1:4 --max-restarts 3 --rdzv-endpoint node0 --rdzv-id job7 -m pkg.train

Flags take both spellings (``--nproc-per-node``, ``--nproc_per_node``) and, as torchrun's, a
``PET_<FLAG>`` environment variable as their default. Every worker gets torchrun's variables
(``RANK``, ``LOCAL_RANK``, ``WORLD_SIZE``, ``MASTER_ADDR``, ``TORCHELASTIC_RESTART_COUNT``, ...)
and zgrad's ``ZGRAD_*`` ones, so ``init_process_group()`` and ``rpc.init_rpc(name)`` need no
arguments. ``--config FILE`` (or ``ZGRAD_CONFIG``) gives zgrad's transport, CURVE and engine
settings. See ``docs/launch.md``.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import uuid
from pathlib import Path

from zgrad.config import load_config
from zgrad.errors import ConfigError
from zgrad.launch.elastic import AgentSpec, RoundInfo, run_agent
from zgrad.launch.rendezvous import RendezvousSettings
from zgrad.launch.scheduler import detect_scheduler
from zgrad.launch.summary import format_failures
from zgrad.launch.workers import OutputPolicy, WorkerSpec
from zgrad.transport.control import load_agent_keys

__all__ = ["main", "get_args_parser", "worker_env"]

PROG = "zgrad-run"
DEFAULT_C10D_PORT = 29400
DEFAULT_STATIC_PORT = 29500
_RDZV_CONF_KEYS = {"join_timeout": 600.0, "last_call_timeout": 30.0, "read_timeout": 60.0,
                   "keep_alive_interval": 1.0, "keep_alive_max_attempt": 10.0}
_STREAMS = {0: (), 1: ("stdout",), 2: ("stderr",), 3: ("stdout", "stderr")}


class _Env(argparse.Action):
    """A flag whose default comes from ``PET_<DEST>`` when set (torchrun's convention)."""

    def __init__(self, dest: str, default=None, required: bool = False, **kwargs):
        value = os.environ.get(f"PET_{dest.upper()}")
        default = value if value is not None else default
        super().__init__(dest=dest, default=default, required=required and default is None, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None):
        setattr(namespace, self.dest, values)


class _EnvFlag(argparse.Action):
    """A switch, also on when ``PET_<DEST>`` is 1/true."""

    def __init__(self, dest: str, default: bool = False, **kwargs):
        raw = os.environ.get(f"PET_{dest.upper()}", "")
        super().__init__(dest=dest, default=raw.lower() in ("1", "true") or default, nargs=0, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None):
        setattr(namespace, self.dest, True)


def get_args_parser() -> argparse.ArgumentParser:
    """torchrun's flags (those zgrad acts on), plus ``--config``."""
    p = argparse.ArgumentParser(prog=PROG, description="Start the workers of a distributed job on this node "
                                "(torchrun's command line).")
    add = p.add_argument
    add("--nnodes", action=_Env, default="1:1", help="number of nodes, or MIN:MAX for an elastic job")
    add("--nproc-per-node", "--nproc_per_node", action=_Env, default="1",
        help="workers per node: a number, 'cpu' (one per core), 'gpu' or 'auto'")
    add("--rdzv-backend", "--rdzv_backend", action=_Env, default="static", help="'c10d' or 'static'")
    add("--rdzv-endpoint", "--rdzv_endpoint", action=_Env, default="", help="HOST[:PORT] of the rendezvous")
    add("--rdzv-id", "--rdzv_id", action=_Env, default="none", help="the job's id, the same on every node")
    add("--rdzv-conf", "--rdzv_conf", action=_Env, default="",
        help="k=v,...: join_timeout, last_call_timeout, read_timeout, keep_alive_interval, keep_alive_max_attempt")
    add("--standalone", action=_EnvFlag, help="one node, a rendezvous on a free local port")
    add("--max-restarts", "--max_restarts", action=_Env, type=int, default=0, help="rounds after a failed one")
    add("--monitor-interval", "--monitor_interval", action=_Env, type=float, default=0.1,
        help="seconds between checks of the workers")
    add("--start-method", "--start_method", action=_Env, default="spawn", choices=["spawn", "fork", "forkserver"],
        help="accepted for torchrun's sake: workers are always new processes (exec)")
    add("--role", action=_Env, default="default", help="the workers' role name (ROLE_NAME)")
    add("-m", "--module", action=_EnvFlag, help="run the entry as 'python -m MODULE'")
    add("--no-python", "--no_python", action=_EnvFlag, help="run the entry itself, not with python")
    add("--run-path", "--run_path", action=_EnvFlag, help="run the script with runpy.run_path")
    add("--log-dir", "--log_dir", action=_Env, default=None, help="where -r/-t write the workers' logs")
    add("-r", "--redirects", action=_Env, default="0",
        help="send streams to log files only: 0 none, 1 stdout, 2 stderr, 3 both; or per local rank, e.g. 0:1,1:2")
    add("-t", "--tee", action=_Env, default="0", help="as --redirects, but also show them on the console")
    add("--local-ranks-filter", "--local_ranks_filter", action=_Env, default="",
        help="show only these local ranks' output on the console, e.g. 0,1")
    add("--node-rank", "--node_rank", action=_Env, type=int, default=0, help="this node's rank (static rendezvous)")
    add("--master-addr", "--master_addr", action=_Env, default="127.0.0.1",
        help="the static rendezvous host (node 0's address)")
    add("--master-port", "--master_port", action=_Env, type=int, default=None,
        help=f"the static rendezvous port (default {DEFAULT_STATIC_PORT})")
    add("--local-addr", "--local_addr", action=_Env, default=None, help="the address other nodes reach this one at")
    add("--shutdown-timeout", "--shutdown_timeout", action=_Env, type=float, default=30.0,
        help="seconds between SIGTERM and SIGKILL when workers are stopped")
    add("--config", action=_Env, default=os.environ.get("ZGRAD_CONFIG"),
        help="zgrad's TOML config (transport, CURVE, engine); default ZGRAD_CONFIG")
    add("training_script", help="the script (or module with -m) to run, followed by its arguments")
    add("training_script_args", nargs=argparse.REMAINDER)
    return p


class UsageError(Exception):
    """A flag's value is wrong; the message names the flag and what it takes."""


def parse_nnodes(text: str) -> tuple[int, int]:
    low, _, high = text.partition(":")
    try:
        pair = (int(low), int(high or low))
    except ValueError:
        raise UsageError(f"--nnodes {text!r}: expected N or MIN:MAX") from None
    if not 1 <= pair[0] <= pair[1]:
        raise UsageError(f"--nnodes {text!r}: need 1 <= MIN <= MAX")
    return pair


def parse_nproc(text: str) -> int:
    if text.isdigit() and int(text) > 0:
        return int(text)
    if text in ("cpu", "auto", "gpu"):
        from zgrad import cuda

        if text == "gpu" or (text == "auto" and cuda.is_available()):
            if not cuda.is_available():
                raise UsageError("--nproc-per-node gpu: CUDA is not available")
            return cuda.device_count()
        return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    raise UsageError(f"--nproc-per-node {text!r}: expected a positive number, 'cpu', 'gpu' or 'auto'")


def parse_streams(flag: str, text: str, nproc: int) -> set[tuple[int, str]]:
    """``-r``/``-t``: one of 0-3 for every local rank, or ``rank:value,...``."""
    chosen: set[tuple[int, str]] = set()
    try:
        if ":" not in text:
            return {(r, s) for r in range(nproc) for s in _STREAMS[int(text)]}
        for item in text.split(","):
            rank, _, value = item.partition(":")
            chosen |= {(int(rank), s) for s in _STREAMS[int(value)]}
    except (KeyError, ValueError):
        raise UsageError(f"{flag} {text!r}: expected 0 (none), 1 (stdout), 2 (stderr), 3 (both), "
                         "or local_rank:value pairs such as 0:1,1:2") from None
    return chosen


def parse_rdzv_conf(text: str) -> dict[str, float]:
    conf = dict(_RDZV_CONF_KEYS)
    for item in filter(None, text.split(",")):
        key, sep, value = item.partition("=")
        if key not in _RDZV_CONF_KEYS or not sep:
            raise UsageError(f"--rdzv-conf: unknown or malformed entry {item!r}; known keys: {', '.join(_RDZV_CONF_KEYS)}")
        try:
            conf[key] = float(value)
        except ValueError:
            raise UsageError(f"--rdzv-conf {key}={value!r}: expected a number of seconds") from None
    return conf


def parse_endpoint(text: str, default_port: int) -> tuple[str, int]:
    if text.startswith("["):
        host, _, rest = text[1:].partition("]")
        port = rest.lstrip(":")
    else:
        host, _, port = text.rpartition(":") if text.count(":") == 1 else (text, "", "")
    try:
        return host or "127.0.0.1", int(port) if port else default_port
    except ValueError:
        raise UsageError(f"rendezvous endpoint {text!r}: expected HOST[:PORT]") from None


def worker_argv(args: argparse.Namespace) -> list[str]:
    script, rest = args.training_script, list(args.training_script_args)
    if args.run_path:
        return [sys.executable, "-u", "-c", "import runpy, sys; del sys.argv[0]; runpy.run_path(sys.argv[0], "
                "run_name='__main__')", script, *rest]
    if args.no_python:
        if args.module:
            raise UsageError("--no-python and -m/--module cannot be used together")
        return [script, *rest]
    if args.module:
        return [sys.executable, "-u", "-m", script, *rest]
    return [sys.executable, "-u", script, *rest]


def worker_env(info: RoundInfo, rank: int, local_rank: int, local_world_size: int, role: str, run_id: str,
               max_restarts: int, threads: str | None, config: str | None) -> dict[str, str]:
    """torchrun's variables for one worker, then zgrad's."""
    env = {
        "RANK": rank, "LOCAL_RANK": local_rank, "WORLD_SIZE": info.world_size, "LOCAL_WORLD_SIZE": local_world_size,
        "GROUP_RANK": info.group_rank, "GROUP_WORLD_SIZE": info.group_world_size, "ROLE_RANK": rank,
        "ROLE_WORLD_SIZE": info.world_size, "ROLE_NAME": role, "MASTER_ADDR": info.master_addr,
        "MASTER_PORT": info.master_port, "TORCHELASTIC_RESTART_COUNT": info.restart_count,
        "TORCHELASTIC_MAX_RESTARTS": max_restarts, "TORCHELASTIC_RUN_ID": run_id,
        "ZGRAD_RANK": rank, "ZGRAD_WORLD_SIZE": info.world_size, "ZGRAD_MASTER_ADDR": info.master_addr,
        "ZGRAD_MASTER_PORT": info.master_port, "ZGRAD_PG_MASTER_ADDR": info.master_addr,
        "ZGRAD_PG_MASTER_PORT": info.pg_master_port, "ZGRAD_ADVERTISE_ADDRESS": info.local_addr,
    }
    if threads is not None:
        env["OMP_NUM_THREADS"] = env["NUMBA_NUM_THREADS"] = threads
    if config:
        env["ZGRAD_CONFIG"] = config
    return {key: str(value) for key, value in env.items()}


def _output(args: argparse.Namespace, nproc: int, run_id: str) -> callable:
    redirected = parse_streams("--redirects", args.redirects, nproc)
    teed = parse_streams("--tee", args.tee, nproc)
    try:
        shown_ranks = {int(r) for r in args.local_ranks_filter.split(",") if r.strip()} or set(range(nproc))
    except ValueError:
        raise UsageError(f"--local-ranks-filter {args.local_ranks_filter!r}: expected local ranks such as 0,1") from None
    to_console = frozenset((r, s) for r in shown_ranks for s in ("stdout", "stderr")
                           if (r, s) not in redirected or (r, s) in teed)
    to_file = frozenset(redirected | teed)
    base: Path | None = None
    if to_file:
        root = Path(args.log_dir) if args.log_dir else Path(tempfile.mkdtemp(prefix="zgrad-run_"))
        root.mkdir(parents=True, exist_ok=True)
        base = Path(tempfile.mkdtemp(prefix=f"{run_id}_", dir=root))
    prefix = f"[{args.role}{{local_rank}}]:" if teed else ""

    def policy(info: RoundInfo) -> OutputPolicy:
        log_dir = base / f"attempt_{info.restart_count}" if base is not None else None
        return OutputPolicy(prefix=prefix, log_dir=log_dir, to_file=to_file, to_console=to_console)

    return policy


def make_spec(args: argparse.Namespace, env: dict[str, str] | None = None) -> AgentSpec:
    """Turn torchrun's flags into this node's agent.

    Raises:
        UsageError: a flag's value is wrong.
        ConfigError: the ``--config`` file is.
    """
    env = dict(os.environ if env is None else env)
    min_nodes, max_nodes = parse_nnodes(args.nnodes)
    nproc = parse_nproc(args.nproc_per_node)
    conf = parse_rdzv_conf(args.rdzv_conf)
    config_path = str(Path(args.config).resolve()) if args.config else None
    keys = None
    if config_path:
        config = load_config(config_path)
        if config.security.curve:
            keys = load_agent_keys(config.security.key_dir)
    backend, run_id = args.rdzv_backend, args.rdzv_id
    endpoint: tuple[str, int] | None
    if args.standalone:
        if max_nodes != 1:
            raise UsageError(f"--standalone runs one node, but --nnodes is {args.nnodes}")
        backend, run_id, endpoint = "c10d", str(uuid.uuid4()), None
    elif backend == "c10d":
        endpoint = parse_endpoint(args.rdzv_endpoint, DEFAULT_C10D_PORT) if args.rdzv_endpoint else None
        if endpoint is None and max_nodes > 1:
            raise UsageError("--rdzv-backend c10d over several nodes needs --rdzv-endpoint HOST[:PORT]")
    elif backend == "static":
        if min_nodes != max_nodes:
            raise UsageError(f"--rdzv-backend static needs a fixed --nnodes, not {args.nnodes}")
        if args.rdzv_endpoint:
            endpoint = parse_endpoint(args.rdzv_endpoint, args.master_port or DEFAULT_STATIC_PORT)
        elif max_nodes > 1 or args.master_port is not None:
            endpoint = (args.master_addr, args.master_port or DEFAULT_STATIC_PORT)
        else:
            endpoint = None
    else:
        raise UsageError(f"--rdzv-backend {backend!r} is not supported; use 'c10d' or 'static'")
    node_rank, local_offset, local_size = args.node_rank, 0, nproc
    task = detect_scheduler(env)
    if task is not None and task.size > 1 and endpoint is None and not args.standalone:
        # Started by srun/mpirun with no rendezvous flags: each task finds its place from the
        # scheduler's variables, as one launcher per node or one per worker.
        backend, static = "static", True
        if run_id == "none":
            run_id = task.job_key
        endpoint = (task.first_host or args.master_addr, task.rendezvous_port())
        if task.one_per_node:
            min_nodes = max_nodes = task.num_nodes
            node_rank = task.node_rank
        else:
            if args.nproc_per_node not in ("1", "auto", "cpu", "gpu"):
                raise UsageError(f"{task.scheduler} started {task.local_size} tasks on this node: each runs one "
                                 f"worker, so --nproc-per-node {args.nproc_per_node} does not apply; start one task "
                                 "per node to have zgrad-run start the node's workers")
            nproc, local_offset, local_size = 1, task.local_rank, task.local_size
            min_nodes = max_nodes = task.size
            node_rank = task.rank
    static = backend == "static"
    if static and not 0 <= node_rank < max_nodes:
        raise UsageError(f"--node-rank {node_rank} is outside 0..{max_nodes - 1} (--nnodes {args.nnodes})")
    settings = RendezvousSettings(
        run_id=run_id, min_nodes=min_nodes, max_nodes=max_nodes, static=static, max_restarts=args.max_restarts,
        join_timeout_s=conf["join_timeout"], last_call_timeout_s=conf["last_call_timeout"],
        node_timeout_s=conf["keep_alive_interval"] * conf["keep_alive_max_attempt"])
    argv = worker_argv(args)
    threads = "1" if local_size > 1 and "OMP_NUM_THREADS" not in env else None
    if threads:
        print(f"{PROG}: setting OMP_NUM_THREADS and NUMBA_NUM_THREADS to 1 for each of the {local_size} workers of "
              "this node (they share its cores); set OMP_NUM_THREADS to choose otherwise", file=sys.stderr)

    def build_workers(info: RoundInfo) -> list[WorkerSpec]:
        return [WorkerSpec(f"{args.role}{local_offset + lr}", info.rank_offset + lr, lr, argv,
                           worker_env(info, info.rank_offset + lr, local_offset + lr, local_size, args.role, run_id,
                                      args.max_restarts, threads, config_path))
                for lr in range(nproc)]

    return AgentSpec(prog=PROG, local_world_size=nproc, build_workers=build_workers,
                     output=_output(args, nproc, run_id), settings=settings, endpoint=endpoint,
                     node_rank=node_rank if static else -1, local_addr=args.local_addr,
                     monitor_interval_s=args.monitor_interval, shutdown_grace_s=args.shutdown_timeout,
                     keep_alive_interval_s=conf["keep_alive_interval"], keys=keys)


def main(argv: list[str] | None = None) -> int:
    args = get_args_parser().parse_args(sys.argv[1:] if argv is None else argv)
    try:
        spec = make_spec(args)
    except (UsageError, ConfigError) as exc:
        print(f"{PROG}: {exc}", file=sys.stderr)
        return 2
    outcome = run_agent(spec)
    if outcome.signalled is not None or outcome.code == 0:
        return outcome.code
    print(format_failures(args.training_script, list(outcome.failures), outcome.reason), file=sys.stderr)
    return outcome.code
