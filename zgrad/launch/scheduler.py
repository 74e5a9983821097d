"""Where a task started by the cluster's scheduler sits in its job: SLURM's ``srun`` or Open MPI's
``mpirun``, read from the variables they set in every task.

A launcher started once per node finds its node rank here; one started once per worker finds
the worker's rank and local rank. Nothing is asked of the network: every task computes the
same rendezvous port from the job's id (:meth:`SchedulerTask.rendezvous_port`).
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Mapping
from dataclasses import dataclass

from zgrad.errors import ConfigError

__all__ = ["SchedulerTask", "detect_scheduler", "expand_hostlist"]

_PORT_BASE, _PORT_SPAN = 20000, 30000


@dataclass(frozen=True)
class SchedulerTask:
    """One task of a scheduler's job step.

    Attributes:
        scheduler: "SLURM" or "Open MPI".
        rank, size: this task's rank among the step's tasks, and their number.
        local_rank, local_size: the same among the tasks on this node.
        node_rank, num_nodes: this node's rank among the step's nodes, and their number.
        first_host: the host of the step's first node (SLURM), else None.
        job_key: a string the same in every task of the step and no other.
    """

    scheduler: str
    rank: int
    size: int
    local_rank: int
    local_size: int
    node_rank: int
    num_nodes: int
    first_host: str | None
    job_key: str

    @property
    def one_per_node(self) -> bool:
        return self.size == self.num_nodes

    def rendezvous_port(self) -> int:
        """A port every task of the step derives alike (in 20000-49999)."""
        return _PORT_BASE + zlib.crc32(self.job_key.encode()) % _PORT_SPAN


def _int(env: Mapping[str, str], name: str, scheduler: str) -> int:
    raw = env.get(name, "")
    try:
        return int(raw)
    except ValueError:
        raise ConfigError(f"{scheduler} set {name}={raw!r}, which is not an integer") from None


def expand_hostlist(text: str) -> list[str]:
    """SLURM's compressed host list (``node[01-03,07],gpu5``) as host names."""
    hosts: list[str] = []
    for match in re.finditer(r"([^,\[]+)(?:\[([^\]]*)\])?(?:,|$)", text):
        prefix, ranges = match.group(1), match.group(2)
        if ranges is None:
            hosts.append(prefix)
            continue
        for part in ranges.split(","):
            low, _, high = part.partition("-")
            width = len(low)
            for number in range(int(low), int(high or low) + 1):
                hosts.append(f"{prefix}{number:0{width}d}")
    return hosts


def _slurm_tasks_on_node(tasks_per_node: str, node_rank: int) -> int | None:
    """The task count of node ``node_rank`` from SLURM_TASKS_PER_NODE (``2(x3),1``)."""
    counts: list[int] = []
    for item in filter(None, tasks_per_node.split(",")):
        found = re.fullmatch(r"(\d+)(?:\(x(\d+)\))?", item.strip())
        if found is None:
            return None
        counts += [int(found.group(1))] * int(found.group(2) or 1)
    return counts[node_rank] if node_rank < len(counts) else None


def detect_scheduler(env: Mapping[str, str]) -> SchedulerTask | None:
    """The task this process is, when ``srun`` or ``mpirun`` started it; else None.

    SLURM counts only inside a job step (``SLURM_STEP_ID`` set: started by ``srun``, not the
    batch script itself, which runs once whatever the task count).

    Raises:
        ConfigError: a scheduler variable is malformed.
    """
    if "SLURM_PROCID" in env and "SLURM_STEP_ID" in env and "SLURM_JOB_ID" in env:
        s = "SLURM"
        node_rank = _int(env, "SLURM_NODEID", s)
        size = _int(env, "SLURM_NTASKS", s) if "SLURM_NTASKS" in env else _int(env, "SLURM_NPROCS", s)
        num_nodes = _int(env, "SLURM_STEP_NUM_NODES", s) if "SLURM_STEP_NUM_NODES" in env else _int(env, "SLURM_NNODES", s)
        tasks_here = _slurm_tasks_on_node(env.get("SLURM_STEP_TASKS_PER_NODE") or env.get("SLURM_TASKS_PER_NODE", ""),
                                          node_rank)
        nodelist = env.get("SLURM_STEP_NODELIST") or env.get("SLURM_JOB_NODELIST") or ""
        hosts = expand_hostlist(nodelist)
        return SchedulerTask(s, _int(env, "SLURM_PROCID", s), size, _int(env, "SLURM_LOCALID", s),
                             tasks_here or max(1, size // max(1, num_nodes)), node_rank, num_nodes,
                             hosts[0] if hosts else None, f"slurm:{env['SLURM_JOB_ID']}.{env['SLURM_STEP_ID']}")
    if "OMPI_COMM_WORLD_RANK" in env and "OMPI_COMM_WORLD_SIZE" in env:
        s = "Open MPI"
        size = _int(env, "OMPI_COMM_WORLD_SIZE", s)
        local_size = _int(env, "OMPI_COMM_WORLD_LOCAL_SIZE", s)
        rank, local_rank = _int(env, "OMPI_COMM_WORLD_RANK", s), _int(env, "OMPI_COMM_WORLD_LOCAL_RANK", s)
        key = env.get("OMPI_MCA_ess_base_jobid") or env.get("PMIX_NAMESPACE") or env.get("OMPI_MCA_orte_hnp_uri", "")
        return SchedulerTask(s, rank, size, local_rank, local_size, (rank - local_rank) // max(1, local_size),
                             max(1, size // max(1, local_size)), None, f"ompi:{key}")
    return None
