"""Jobs started by the cluster's scheduler: a real single-machine SLURM cluster (Debian's
slurm-wlm and munge, brought up in a temporary directory) runs a 2-task DDP job with ``srun``
and with ``sbatch --wait``, and Open MPI's ``mpirun -np 2`` runs the same; each task finds its
place from the scheduler's variables alone. Skipped where the packages (or root) are missing;
``.ci/run`` installs them."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
from rpc_harness import free_port
import pytest

import zgrad
from run_harness import HERE, Launch, launcher_env, launches
from zgrad.launch.scheduler import detect_scheduler, expand_hostlist

pytestmark = [pytest.mark.timeout(300), pytest.mark.xdist_group("schedulers")]

TRAINER = str(HERE / "elastic_trainer.py")
RUN = [sys.executable, "-m", "zgrad.distributed.run"]
EPOCHS = "3"


def test_slurm_variables_place_a_task_per_worker_and_a_task_per_node():
    per_worker = detect_scheduler({"SLURM_JOB_ID": "7", "SLURM_STEP_ID": "0", "SLURM_PROCID": "3", "SLURM_NTASKS": "4",
                                   "SLURM_LOCALID": "1", "SLURM_NODEID": "1", "SLURM_NNODES": "2",
                                   "SLURM_TASKS_PER_NODE": "2(x2)", "SLURM_JOB_NODELIST": "gpu[07-08]"})
    assert (per_worker.rank, per_worker.size, per_worker.local_rank, per_worker.local_size) == (3, 4, 1, 2)
    assert (per_worker.node_rank, per_worker.num_nodes, per_worker.first_host) == (1, 2, "gpu07")
    assert not per_worker.one_per_node
    per_node = detect_scheduler({"SLURM_JOB_ID": "7", "SLURM_STEP_ID": "1", "SLURM_PROCID": "1", "SLURM_NTASKS": "2",
                                 "SLURM_LOCALID": "0", "SLURM_NODEID": "1", "SLURM_NNODES": "2",
                                 "SLURM_TASKS_PER_NODE": "1(x2)", "SLURM_JOB_NODELIST": "a1,b2"})
    assert per_node.one_per_node and per_node.node_rank == 1 and per_node.first_host == "a1"
    assert per_node.rendezvous_port() != per_worker.rendezvous_port()  # another step, another port
    batch_script = {"SLURM_JOB_ID": "7", "SLURM_PROCID": "0", "SLURM_NTASKS": "4"}  # no step: the script itself
    assert detect_scheduler(batch_script) is None


def test_open_mpi_variables_place_each_task():
    task = detect_scheduler({"OMPI_COMM_WORLD_RANK": "3", "OMPI_COMM_WORLD_SIZE": "4", "OMPI_COMM_WORLD_LOCAL_RANK": "1",
                             "OMPI_COMM_WORLD_LOCAL_SIZE": "2", "OMPI_MCA_ess_base_jobid": "4409"})
    assert (task.scheduler, task.rank, task.local_rank, task.node_rank, task.num_nodes) == ("Open MPI", 3, 1, 1, 2)


def test_slurm_host_lists_expand():
    assert expand_hostlist("node[01-03,07],gpu5,x[9-10]") == ["node01", "node02", "node03", "node07", "gpu5", "x9", "x10"]


def run(argv: list[str], cwd: Path, env: dict[str, str], timeout_s: float = 180.0) -> str:
    """Run ``argv`` to its end (killed with its session on a timeout); fail on a non-zero status."""
    launch = Launch([], cwd, env, argv=argv)
    with launches(launch):
        code = launch.finish(timeout_s)
    assert code == 0, f"{' '.join(argv)} exited with {code}:\n{launch.output[-4000:]}"
    return launch.output


def weights(path: Path) -> dict[str, np.ndarray]:
    return {name: value.numpy() for name, value in zgrad.load(path).items()}


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> dict[str, np.ndarray]:
    """The trainer's final weights over 2 workers started by zgrad-run on its own."""
    where = tmp_path_factory.mktemp("reference")
    run([*RUN, "--standalone", "--nproc-per-node", "2", TRAINER, EPOCHS, "snap.pt", "final.pt"], where, launcher_env())
    return weights(where / "final.pt")


def assert_same(found: Path, want: dict[str, np.ndarray]) -> None:
    got = weights(found)
    assert sorted(got) == sorted(want)
    for name in want:
        np.testing.assert_array_equal(got[name], want[name])


class SlurmCluster:
    """munged, slurmctld and slurmd of a one-machine cluster, all in ``root`` (SLURM_CONF points there)."""

    DAEMONS = ("munged", "slurmctld", "slurmd", "srun", "sbatch", "sinfo")

    def __init__(self, root: Path):
        self.root = root
        self.pids: list[Path] = []
        key = root / "munge.key"
        key.write_bytes(os.urandom(1024))
        key.chmod(0o600)
        socket_path = root / "munge.sock"
        for name in ("state", "spool", "log"):
            (root / name).mkdir()
        self._start(["munged", "-f", f"--key-file={key}", f"--socket={socket_path}", f"--log-file={root}/log/munged.log",
                     f"--pid-file={root}/munged.pid", f"--seed-file={root}/munged.seed"], root / "munged.pid")
        host = socket.gethostname().split(".")[0]
        conf = root / "slurm.conf"
        conf.write_text("\n".join([
            "ClusterName=zgradtest", f"SlurmctldHost={host}(127.0.0.1)", "SlurmUser=root", "SlurmdUser=root",
            f"SlurmctldPort={free_port()}", f"SlurmdPort={free_port()}", "AuthType=auth/munge",
            f"AuthInfo=socket={socket_path}", "CredType=cred/munge", f"StateSaveLocation={root}/state",
            f"SlurmdSpoolDir={root}/spool", f"SlurmctldPidFile={root}/slurmctld.pid", f"SlurmdPidFile={root}/slurmd.pid",
            f"SlurmctldLogFile={root}/log/slurmctld.log", f"SlurmdLogFile={root}/log/slurmd.log",
            "ProctrackType=proctrack/linuxproc", "TaskPlugin=task/none", "MpiDefault=none", "ReturnToService=2",
            "SchedulerType=sched/builtin", "SelectType=select/cons_tres", "SelectTypeParameters=CR_CPU",
            "JobCompType=jobcomp/none", "AccountingStorageType=accounting_storage/none",
            "JobAcctGatherType=jobacct_gather/none",
            f"NodeName={host} NodeAddr=127.0.0.1 CPUs={os.cpu_count()} State=UNKNOWN",
            "PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:4", ""]))
        self.env = {**launcher_env(), "SLURM_CONF": str(conf)}
        self._start(["slurmctld", "-f", str(conf)], root / "slurmctld.pid")
        self._start(["slurmd", "-f", str(conf)], root / "slurmd.pid")
        self._wait_idle()

    def _start(self, argv: list[str], pid_file: Path) -> None:
        self.pids.append(pid_file)
        subprocess.run(argv, check=True, timeout=60, env={**os.environ, "SLURM_CONF": str(self.root / "slurm.conf")},
                       capture_output=True)

    def _wait_idle(self, timeout_s: float = 90.0) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            state = subprocess.run(["sinfo", "-h", "-o", "%t"], env=self.env, capture_output=True, text=True, timeout=30)
            if state.stdout.strip() == "idle":
                return
            time.sleep(0.5)
        logs = "\n".join(p.read_text()[-2000:] for p in (self.root / "log").glob("*.log"))
        self.stop()
        pytest.fail(f"the SLURM node did not become idle within {timeout_s:g} s:\n{logs}")

    def stop(self) -> None:
        for pid_file in reversed(self.pids):
            try:
                pid = int(pid_file.read_text().split()[0])
            except (OSError, ValueError, IndexError):
                continue
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                continue
            deadline = time.monotonic() + 15
            while time.monotonic() < deadline and Path(f"/proc/{pid}").exists():
                time.sleep(0.1)
            if Path(f"/proc/{pid}").exists():
                os.kill(pid, signal.SIGKILL)


@pytest.fixture(scope="module")
def slurm(tmp_path_factory):
    missing = [name for name in SlurmCluster.DAEMONS if shutil.which(name) is None]
    if missing:
        pytest.skip(f"SLURM is not installed here ({', '.join(missing)} missing; apt-get install slurm-wlm munge)")
    if os.geteuid() != 0:
        pytest.skip("the test cluster's slurmd runs jobs as root: run as root (as CI does)")
    cluster = SlurmCluster(tmp_path_factory.mktemp("slurm"))
    try:
        yield cluster
    finally:
        cluster.stop()


def test_srun_with_a_task_per_worker_trains_as_one_launcher_does(slurm, reference, tmp_path):
    run(["srun", "-n", "2", *RUN, TRAINER, EPOCHS, "snap.pt", "final.pt"], tmp_path, slurm.env)
    assert_same(tmp_path / "final.pt", reference)


def test_sbatch_wait_with_a_launcher_per_node_trains_as_one_launcher_does(slurm, reference, tmp_path):
    script = tmp_path / "job.sbatch"
    script.write_text("\n".join([
        "#!/bin/bash", "#SBATCH --nodes=1", "#SBATCH --ntasks-per-node=1", "#SBATCH --cpus-per-task=2",
        f"#SBATCH --output={tmp_path}/job.out",
        f"srun {' '.join(RUN)} --nproc-per-node 2 {TRAINER} {EPOCHS} snap.pt final.pt", ""]))
    run(["sbatch", "--wait", f"--chdir={tmp_path}", str(script)], tmp_path, slurm.env)
    assert_same(tmp_path / "final.pt", reference)


def test_srun_starts_one_zgrad_launch_per_node_of_a_config(slurm, reference, tmp_path):
    # Both tasks on one machine read SLURM_NODEID=0: the task rank is what tells the nodes apart.
    ports = [free_port() for _ in range(3)]
    config = tmp_path / "two-nodes.toml"
    config.write_text(f'[job]\nname = "srun-nodes"\n[ddp]\nmaster_port = {ports[2]}\n'
                      + "".join(f'[[workers]]\nname = "worker{r}"\nhost = "127.0.0.1"\nport = {ports[r]}\nnode = {r}\n'
                                for r in range(2)))
    output = run(["srun", "-n", "2", sys.executable, "-m", "zgrad.launch.cli", "--config", str(config), "--", TRAINER,
                  EPOCHS, "snap.pt", "final.pt"], tmp_path, slurm.env)
    assert "[worker0] rank 0 epoch 2" in output and "[worker1] rank 1 epoch 2" in output
    assert_same(tmp_path / "final.pt", reference)


def test_mpirun_starts_a_task_per_worker_that_trains_as_one_launcher_does(reference, tmp_path):
    if shutil.which("mpirun") is None:
        pytest.skip("Open MPI is not installed here (apt-get install openmpi-bin)")
    env = {**launcher_env(), "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}
    run(["mpirun", "--oversubscribe", "-np", "2", "-x", "PYTHONPATH", "-x", "NUMBA_NUM_THREADS", *RUN, TRAINER, EPOCHS,
         "snap.pt", "final.pt"], tmp_path, env)
    assert_same(tmp_path / "final.pt", reference)
