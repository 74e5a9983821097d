"""``zgrad-launch``: start the workers of a job on this node and watch them.

Usage::

    zgrad-launch --config FILE [--node-rank N] [--dry-run] [--grace-s S] [--max-restarts N] [-- ENTRY ARGS...]
    zgrad-launch check FILE                  # validate a config and its key files, print the plan
    zgrad-launch keygen --out DIR --workers N  # CURVE keys for [security] curve = true
    zgrad-launch trace FILE                  # per-worker summary of a distributed autograd trace

Each worker of this node (``[[workers]]`` whose ``node`` is this node's rank) runs as its own
process (``sys.executable``, never fork) with ``ZGRAD_RANK``, ``ZGRAD_WORLD_SIZE``,
``ZGRAD_WORKER_NAME``, ``ZGRAD_CONFIG``, ``ZGRAD_MASTER_ADDR`` and ``ZGRAD_MASTER_PORT`` set (and
``ZGRAD_PG_MASTER_ADDR``/``ZGRAD_PG_MASTER_PORT`` for ``init_process_group``).
With ``transport.kind = "inproc"`` one process runs every worker as a thread
(:mod:`zgrad.launch.inproc_runner`). Output lines are prefixed with ``[name]``. The launcher
exits with the status of the first worker that failed, after stopping the others; SIGINT and
SIGTERM stop every worker (SIGTERM, then SIGKILL after the grace period). If the launcher itself
is killed, its workers are killed too (Linux; :mod:`zgrad.utils.orphans`). With ``--max-restarts N``
the workers of a failed round are stopped and all started again, up to N times (one-node jobs;
over several nodes, ``zgrad-run`` coordinates the rounds). Starting, watching and stopping are
:mod:`zgrad.launch.elastic`'s, shared with ``zgrad-run``.
"""

from __future__ import annotations

import argparse
import os
import shlex
import signal
import socket
import sys
from dataclasses import dataclass, field
from pathlib import Path

from zgrad.config import Config, load_config
from zgrad.errors import ConfigError
from zgrad.launch.elastic import AgentSpec, RoundInfo, run_agent
from zgrad.launch.rendezvous import RendezvousSettings
from zgrad.launch.scheduler import detect_scheduler
from zgrad.launch.summary import format_failures
from zgrad.launch.workers import OutputPolicy, WorkerFailure, WorkerSpec

__all__ = ["main", "Plan", "make_plan", "run_plan"]

DEMO_ENTRY = "zgrad.launch.demo"
PROG = "zgrad-launch"


class LaunchError(Exception):
    """A problem found before anything starts."""


@dataclass
class Proc:
    name: str
    rank: int | None
    argv: list[str]
    env: dict[str, str]  # only the variables the launcher sets


@dataclass
class Plan:
    config: Config
    config_path: Path
    node_rank: int
    entry_argv: list[str]
    master_addr: str
    master_port: int
    fixed_master_port: bool = False
    procs: list[Proc] = field(default_factory=list)
    _ports: dict[int, list[int]] = field(default_factory=dict)

    def round_ports(self, restart: int, used: set[int]) -> list[int]:
        """Two rendezvous ports for restarted round ``restart`` (RPC, process group), free now
        and never used by an earlier round of this launcher."""
        if restart not in self._ports:
            ports = []
            while len(ports) < 2:
                port = free_port()
                if port not in used:
                    used.add(port)
                    ports.append(port)
            self._ports[restart] = ports
        return self._ports[restart]

    def describe(self) -> str:
        cfg = self.config
        lines = [
            f"config {self.config_path}: job {cfg.job.name!r}, transport {cfg.transport.kind}, "
            f"engine {cfg.engine.mode}, curve {'on' if cfg.security.curve else 'off'}, "
            f"{len(cfg.workers)} worker(s) on {len({w.node for w in cfg.workers})} node(s)",
            f"node {self.node_rank}: {len(self.procs)} process(es); rendezvous at {self.master_addr}:{self.master_port}",
        ]
        for p in self.procs:
            env = " ".join(f"{k}={shlex.quote(v)}" for k, v in p.env.items())
            lines.append(f"  [{p.name}] {env} {shlex.join(p.argv)}")
        return "\n".join(lines)


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def place_from_scheduler(cfg: Config, env: dict[str, str]) -> tuple[int, int | None]:
    """This launcher's node, and the one worker it runs when the scheduler started one task per
    worker (else None): ``srun``/``mpirun`` tasks are matched to the config's nodes when there
    are as many tasks as nodes (several may share a machine), else to its workers."""
    task = detect_scheduler(env)
    nodes = sorted({w.node for w in cfg.workers})
    if task is None or task.size == 1:
        return nodes[0] if nodes else 0, None
    if task.size == len(nodes):
        return nodes[task.rank], None
    if task.size == len(cfg.workers):
        return cfg.workers[task.rank].node, task.rank
    raise LaunchError(
        f"{task.scheduler} started {task.size} task(s), but the config has {len(nodes)} node(s) and "
        f"{len(cfg.workers)} worker(s): start one task per node ({len(nodes)} tasks, e.g. srun --ntasks-per-node=1) "
        f"or one per worker ({len(cfg.workers)} tasks)"
    )


def entry_argv(entry: str, args: list[str]) -> list[str]:
    """``python -m MODULE`` for a module name, ``python PATH`` for a script."""
    if entry.endswith(".py") or os.sep in entry or os.path.isfile(entry):
        if not os.path.isfile(entry):
            raise LaunchError(f"entry script {entry!r} does not exist")
        return [os.path.abspath(entry), *args]
    return ["-m", entry, *args]


def missing_curve_keys(cfg: Config, ranks: list[int]) -> list[Path]:
    """The CURVE key files that workers ``ranks`` load and ``[security] key_dir`` lacks: every
    rank's public key ``worker-<r>.key`` and their own ``worker-<r>.key_secret`` (the layout
    ``zgrad-launch keygen`` writes). ``key_dir`` is relative to the directory the launcher runs in,
    as it is for its workers."""
    from zgrad.transport import key_files

    key_dir = cfg.security.key_dir
    needed = [key_files(key_dir, r)[0] for r in range(len(cfg.workers))]
    needed += [key_files(key_dir, r)[1] for r in ranks]
    return [path for path in needed if not path.is_file()]


def make_plan(config_path: str | os.PathLike, node_rank: int | None = None, cli_entry: list[str] | None = None,
              env: dict[str, str] | None = None) -> Plan:
    """Validate the config and work out the processes this node starts.

    Raises:
        ConfigError: the config is invalid.
        LaunchError: the config cannot be launched as asked (CURVE key files missing, say).
    """
    env = dict(os.environ if env is None else env)
    path = Path(config_path).resolve()
    cfg = load_config(path)
    if not cfg.workers:
        raise LaunchError(f"config {path} lists no [[workers]]; add one [[workers]] table per worker")
    only_worker = None
    if node_rank is None:
        node_rank, only_worker = place_from_scheduler(cfg, env)
    nodes = sorted({w.node for w in cfg.workers})
    local = [(rank, w) for rank, w in enumerate(cfg.workers) if w.node == node_rank
             and only_worker in (None, rank)]
    if not local:
        raise LaunchError(f"no [[workers]] entry has node = {node_rank}; the config's nodes are {nodes}")
    if cfg.job.entry == "" and cfg.job.args:
        raise LaunchError("config key 'job.args' is set but 'job.entry' is empty")
    if cfg.security.curve:
        missing = missing_curve_keys(cfg, [rank for rank, _ in local])
        if missing:
            key_dir = cfg.security.key_dir
            raise LaunchError(
                f"'security.curve' is on but the CURVE key files {', '.join(path.name for path in missing)} are "
                f"missing from 'security.key_dir' = {key_dir!r} ({Path(key_dir).resolve()}); create them with "
                f"`{PROG} keygen --out {key_dir} --workers {len(cfg.workers)}`"
            )
    if cli_entry:
        entry, args = cli_entry[0], list(cli_entry[1:])
    elif cfg.job.entry:
        entry, args = cfg.job.entry, list(cfg.job.args)
    else:
        entry, args = DEMO_ENTRY, []
    w0 = cfg.workers[0]
    if w0.port:
        master_addr, master_port = w0.host, w0.port
    elif len(nodes) > 1:
        raise LaunchError(
            f"a job over several nodes needs a fixed rendezvous: set 'workers[0].port' (rank 0, {w0.name!r}, "
            f"on {w0.host}) to a port other than 0"
        )
    else:
        master_addr, master_port = "127.0.0.1", free_port()
    plan = Plan(cfg, path, node_rank, [], master_addr, master_port, fixed_master_port=bool(w0.port))
    base = {"ZGRAD_WORLD_SIZE": str(len(cfg.workers)), "ZGRAD_CONFIG": str(path),
            "ZGRAD_MASTER_ADDR": master_addr, "ZGRAD_MASTER_PORT": str(master_port)}
    # The process group (init_process_group) has a mesh of its own: rank 0 listens at another port,
    # [ddp] master_port if set, else a free one (only one node can pick it alone).
    if cfg.ddp.master_port or len(nodes) == 1:
        base["ZGRAD_PG_MASTER_ADDR"] = master_addr
        base["ZGRAD_PG_MASTER_PORT"] = str(cfg.ddp.master_port or free_port())
    inproc = cfg.transport.kind == "inproc"
    if inproc and only_worker is not None:
        raise LaunchError("transport 'inproc' runs every worker in one process: start one task, not one per worker")
    if inproc and len(nodes) > 1:
        raise LaunchError("transport 'inproc' runs every worker in one process: all [[workers]] must share one node")
    num_procs = 1 if inproc else len(local)
    threads = str(max(1, (os.cpu_count() or 1) // num_procs))
    for var in ("OMP_NUM_THREADS", "NUMBA_NUM_THREADS"):
        if var not in env:
            base[var] = threads
    target = entry_argv(entry, args)
    if inproc:
        plan.procs.append(Proc("inproc", None, [sys.executable, "-m", "zgrad.launch.inproc_runner", *target], base))
    else:
        for rank, w in local:
            penv = {"ZGRAD_RANK": str(rank), "ZGRAD_WORKER_NAME": w.name, **base}
            plan.procs.append(Proc(w.name, rank, [sys.executable, *target], penv))
    plan.entry_argv = target
    return plan


def _round_env(plan: Plan, proc: Proc, info: RoundInfo, used: set[int]) -> dict[str, str]:
    """A worker's variables in round ``info``: a restarted round gets fresh rendezvous ports
    (unless the config pins them), so that no worker dials an address of the dead round."""
    env = {**proc.env, "TORCHELASTIC_RESTART_COUNT": str(info.restart_count), "ZGRAD_RESTART_COUNT": str(info.restart_count)}
    if info.restart_count and not plan.fixed_master_port:
        env["ZGRAD_MASTER_PORT"] = str(plan.round_ports(info.restart_count, used)[0])
    if info.restart_count and "ZGRAD_PG_MASTER_PORT" in env and not plan.config.ddp.master_port:
        env["ZGRAD_PG_MASTER_PORT"] = str(plan.round_ports(info.restart_count, used)[1])
    return env


def run_plan(plan: Plan, grace_s: float, max_restarts: int = 0) -> int:
    """Start this node's workers and watch them to the end (blocks); return the exit status:
    0, the first failed worker's status (128 + signal for a signal), or 128 + the signal that
    stopped the launcher."""
    used: set[int] = {plan.master_port}

    def build_workers(info: RoundInfo) -> list[WorkerSpec]:
        return [WorkerSpec(p.name, p.rank, i, p.argv, _round_env(plan, p, info, used)) for i, p in enumerate(plan.procs)]

    inproc = plan.procs[0].rank is None  # the inproc runner prefixes its lines itself
    output = OutputPolicy(merge_stderr=True, prefix="" if inproc else "[{name}] ")
    settings = RendezvousSettings(run_id=plan.config.job.name, min_nodes=1, max_nodes=1, static=False,
                                  max_restarts=max_restarts, join_timeout_s=60.0, last_call_timeout_s=0.0,
                                  node_timeout_s=60.0)
    outcome = run_agent(AgentSpec(prog=PROG, local_world_size=len(plan.procs), build_workers=build_workers,
                                  output=lambda info: output, settings=settings, shutdown_grace_s=grace_s))
    count = len(plan.procs)
    if outcome.signalled is not None:
        print(f"{PROG}: received {signal.Signals(outcome.signalled).name}; stopped all {count} worker process(es)", flush=True)
        return outcome.code
    if outcome.code == 0:
        print(f"{PROG}: all {count} worker process(es) finished", flush=True)
        return 0
    failure = next((f for f in reversed(outcome.failures) if isinstance(f, WorkerFailure)), None)
    print(format_failures(f"{PROG} job {plan.config.job.name!r}", list(outcome.failures), outcome.reason),
          file=sys.stderr, flush=True)
    if failure is None:
        print(f"{PROG}: {outcome.reason}", flush=True)
        return 1
    code = failure.exitcode
    status = f"signal {signal.Signals(-code).name}" if code < 0 else f"exit status {code}"
    print(f"{PROG}: worker {failure.name} failed with {status}; stopped the other workers", flush=True)
    return 128 - code if code < 0 else code


def _keygen(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog=f"{PROG} keygen", description="Write CURVE key pairs for N workers.")
    parser.add_argument("--out", required=True, help="directory for worker-<rank>.key / .key_secret")
    parser.add_argument("--workers", type=int, required=True, help="number of workers")
    args = parser.parse_args(argv)
    from zgrad.transport import generate_keys

    try:
        written = generate_keys(args.out, args.workers)
    except (ValueError, FileExistsError) as exc:
        print(f"{PROG} keygen: {exc}", file=sys.stderr)
        return 2
    for path in written:
        print(path)
    print(f"wrote {args.workers} worker key pair(s) and the launcher agents' pair to {args.out}; set [security] "
          f"curve = true, key_dir = {str(args.out)!r}")
    return 0


def _check(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog=f"{PROG} check",
        description="Validate a config and print the plan of every node. With CURVE, the key files of every "
                    "node's workers must be in key_dir: run it where keygen wrote them.")
    parser.add_argument("config")
    args = parser.parse_args(argv)
    try:
        cfg = load_config(Path(args.config).resolve())
        nodes = sorted({w.node for w in cfg.workers}) or [0]
        for node in nodes:
            print(make_plan(args.config, node, env={}).describe())
    except (ConfigError, LaunchError) as exc:
        print(f"{PROG}: {exc}", file=sys.stderr)
        return 2
    print("config OK")
    return 0


def _trace(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog=f"{PROG} trace",
                                     description="Summarise a distributed autograd trace (dist_autograd.trace) per worker.")
    parser.add_argument("file", help="the Chrome trace JSON file")
    args = parser.parse_args(argv)
    from zgrad.launch.trace_summary import format_summary, load_trace, summarize

    try:
        trace = load_trace(args.file)
    except (OSError, ValueError) as exc:
        print(f"{PROG} trace: {exc}", file=sys.stderr)
        return 2
    print(format_summary(summarize(trace)))
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "keygen":
        return _keygen(argv[1:])
    if argv and argv[0] == "check":
        return _check(argv[1:])
    if argv and argv[0] == "trace":
        return _trace(argv[1:])
    entry: list[str] = []
    if "--" in argv:
        cut = argv.index("--")
        argv, entry = argv[:cut], argv[cut + 1:]
    parser = argparse.ArgumentParser(
        prog=PROG, description="Start the workers of a zgrad job on this node.",
        epilog=f"subcommands: '{PROG} check FILE', '{PROG} keygen --out DIR --workers N', '{PROG} trace FILE'. "
               "Anything after '--' is the entry (module or script) and its arguments.")
    parser.add_argument("--config", required=True, help="the job's TOML config")
    parser.add_argument("--node-rank", type=int, default=None,
                        help="this node's rank (default: from srun's or mpirun's task variables, else 0)")
    parser.add_argument("--dry-run", action="store_true", help="print what would start, start nothing")
    parser.add_argument("--grace-s", type=float, default=5.0, help="seconds between SIGTERM and SIGKILL when stopping")
    parser.add_argument("--max-restarts", type=int, default=0,
                        help="when a worker fails, restart this node's workers up to this many times")
    args = parser.parse_args(argv)
    try:
        plan = make_plan(args.config, args.node_rank, entry)
    except (ConfigError, LaunchError) as exc:
        print(f"{PROG}: {exc}", file=sys.stderr)
        return 2
    if args.max_restarts and len({w.node for w in plan.config.workers}) > 1:
        print(f"{PROG}: --max-restarts over several nodes needs their launchers to agree on each round; start "
              f"the job with `zgrad-run --nnodes N --rdzv-backend c10d --rdzv-endpoint HOST:PORT --config "
              f"{args.config} ENTRY` instead", file=sys.stderr)
        return 2
    if args.dry_run:
        print(plan.describe())
        print(f"{PROG}: dry run, nothing started")
        return 0
    return run_plan(plan, args.grace_s, args.max_restarts)


if __name__ == "__main__":
    sys.exit(main())
