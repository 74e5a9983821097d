"""zgrad-launch through the real command: demo jobs, failures, signals, multi-node, subcommands."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from rpc_harness import free_port
import pytest

from zgrad.config import load_config
from zgrad.transport import generate_keys
from paths import REPO

ROOT = REPO
CONFIGS = ROOT / "configs"
LAUNCH = [sys.executable, "-m", "zgrad.launch.cli"]
SHORT = ["--", "zgrad.launch.demo", "--epochs", "2", "--samples", "1000", "--no-target"]


def launch(*args: str, timeout: float = 60.0, cwd: Path = ROOT, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([*LAUNCH, *args], capture_output=True, text=True, timeout=timeout, cwd=cwd, **kwargs)


def write_config(path: Path, kind: str = "tcp", workers: int = 2, extra: str = "", ports=None, nodes=None) -> Path:
    text = f'[job]\nname = "t{os.getpid()}-{path.stem}"\n\n[transport]\nkind = "{kind}"\n'
    if kind == "ipc":
        text += f'ipc_dir = "{path.parent}"\n'
    text += extra
    for r in range(workers):
        text += f'\n[[workers]]\nname = "worker{r}"\n'
        if ports:
            text += f"port = {ports[r]}\n"
        if nodes:
            text += f"node = {nodes[r]}\n"
    path.write_text(text)
    return path


def gone(pid: int) -> bool:
    """The process has exited (a zombie left to a parent that no longer reaps counts as gone)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


@pytest.mark.timeout(90)
def test_default_demo_reaches_target_over_tcp():
    started = time.monotonic()
    result = launch("--config", str(CONFIGS / "cluster.toml"), timeout=80)
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert any(line.startswith("[worker0] epoch  1 ") for line in lines)
    assert "reached the 90% target" in result.stdout
    assert lines[-1] == "zgrad-launch: all 2 worker process(es) finished"
    assert time.monotonic() - started < 60


@pytest.mark.timeout(60)
@pytest.mark.parametrize("kind", ["ipc", "inproc"])
def test_short_demo_over_ipc_and_inproc(tmp_path, kind):
    result = launch("--config", str(write_config(tmp_path / f"{kind}.toml", kind)), *SHORT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "[worker0] epoch  2 " in result.stdout and "[worker0] done:" in result.stdout


@pytest.mark.timeout(60)
def test_four_workers_smart_mode(tmp_path):
    cfg = write_config(tmp_path / "smart4.toml", workers=4, extra='\n[engine]\nmode = "smart"\n')
    result = launch("--config", str(cfg), *SHORT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "over 4 workers" in result.stdout and "[worker0] done:" in result.stdout


FAILING = """
import os, sys, time
print("hello from", os.environ["ZGRAD_WORKER_NAME"], os.environ["OMP_NUM_THREADS"], flush=True)
if os.environ["ZGRAD_RANK"] == "1":
    raise SystemExit(3)
time.sleep(60)
"""


@pytest.mark.timeout(30)
def test_failing_worker_stops_the_others_and_is_named(tmp_path):
    script = tmp_path / "job.py"
    script.write_text(FAILING)
    started = time.monotonic()
    result = launch("--config", str(write_config(tmp_path / "c.toml")), "--", str(script), timeout=25)
    assert result.returncode == 3
    assert "[worker1] hello from worker1" in result.stdout
    assert result.stdout.splitlines()[-1] == "zgrad-launch: worker worker1 failed with exit status 3; stopped the other workers"
    assert time.monotonic() - started < 20


INPROC_FAILING = """
from zgrad.launch.worker import identity

def main(argv):
    me = identity()
    print("rank", me.rank, flush=True)
    if me.rank == 1:
        raise RuntimeError("worker one broke")
    return 0
"""


@pytest.mark.timeout(30)
def test_inproc_failing_worker_is_named(tmp_path):
    script = tmp_path / "job.py"
    script.write_text(INPROC_FAILING)
    result = launch("--config", str(write_config(tmp_path / "c.toml", "inproc")), "--", str(script), timeout=25)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "[worker0] rank 0" in result.stdout and "[worker1] RuntimeError: worker one broke" in result.stdout
    assert "worker worker1 failed with exit status 1" in result.stdout


INPROC_PLAIN_SCRIPT = """
import argparse

from zgrad.distributed import rpc

parser = argparse.ArgumentParser()
parser.add_argument("--n", type=int, default=1)
args = parser.parse_args()


def square(x):
    return x * x


def main():
    rpc.init_rpc()
    if rpc.get_worker_info().id == 0:
        print("square", rpc.rpc_sync("worker1", square, args=(args.n,)))
    rpc.shutdown()
"""


@pytest.mark.timeout(60)
def test_an_inproc_script_reads_its_arguments_calls_its_own_functions_and_uses_plain_init_rpc(tmp_path):
    # Three things a script under configs/inproc.toml does as it would under one process per
    # worker: argparse at module level sees [script, args...], a function defined in the script
    # is an RPC target (the script is __main__), and rpc.init_rpc() finds who the thread is.
    script = tmp_path / "job.py"
    script.write_text(INPROC_PLAIN_SCRIPT)
    result = launch("--config", str(write_config(tmp_path / "c.toml", "inproc")), "--", str(script), "--n", "7",
                    timeout=50, cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "[worker0] square 49" in result.stdout


STUBBORN = """
import os, signal, sys, time
from pathlib import Path
if os.environ["ZGRAD_RANK"] == "1":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)   # must be killed after the grace period
Path(sys.argv[1], os.environ["ZGRAD_RANK"]).write_text(str(os.getpid()))
time.sleep(60)
"""


def start_stubborn_job(tmp_path: Path, *launcher_args: str, **popen_args) -> tuple[subprocess.Popen, list[int]]:
    """Launch STUBBORN on two workers; return the launcher and, once both run, the workers' pids."""
    script = tmp_path / "job.py"
    script.write_text(STUBBORN)
    pids = tmp_path / "pids"
    pids.mkdir()
    launcher = subprocess.Popen([*LAUNCH, "--config", str(write_config(tmp_path / "c.toml")), *launcher_args,
                                 "--", str(script), str(pids)], **popen_args)
    try:
        deadline = time.monotonic() + 15
        while len(list(pids.iterdir())) < 2 or any(not p.read_text() for p in pids.iterdir()):
            assert time.monotonic() < deadline, "workers did not start"
            time.sleep(0.05)
    except BaseException:
        launcher.kill()
        raise
    return launcher, [int(p.read_text()) for p in pids.iterdir()]


@pytest.mark.timeout(30)
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_signal_leaves_no_worker_behind(tmp_path, signum):
    launcher, workers = start_stubborn_job(tmp_path, "--grace-s", "1", stdout=subprocess.PIPE,
                                           stderr=subprocess.STDOUT, text=True)
    try:
        launcher.send_signal(signum)
        out, _ = launcher.communicate(timeout=15)
    finally:
        launcher.kill()
    assert launcher.returncode == 128 + signum
    assert f"received {signal.Signals(signum).name}" in out
    assert all(gone(pid) for pid in workers)


@pytest.mark.timeout(30)
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="parent-death signal is Linux-only")
def test_killed_launcher_takes_its_workers_along(tmp_path):
    """SIGKILL gives the launcher no chance to stop anyone: the workers must still go, including
    rank 1, which ignores SIGTERM."""
    launcher, workers = start_stubborn_job(tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        launcher.kill()
        launcher.wait(10)
        deadline = time.monotonic() + 10
        while not all(gone(pid) for pid in workers):
            assert time.monotonic() < deadline, f"workers outlived their launcher: {[p for p in workers if not gone(p)]}"
            time.sleep(0.05)
    finally:
        launcher.kill()
        for pid in workers:
            if not gone(pid):
                os.kill(pid, signal.SIGKILL)


@pytest.mark.timeout(30)
@pytest.mark.parametrize("extra, words", [
    ('\n[rpc]\nnum_worker_threadz = 4\n', ["rpc.num_worker_threadz", "Did you mean 'num_worker_threads'"]),
    ('\n[engine]\nmode = "smrat"\n', ["'engine.mode'", "'smrat'", "Did you mean 'smart'"]),
])
def test_config_errors_fail_before_anything_starts(tmp_path, extra, words):
    marker = tmp_path / "started"
    script = tmp_path / "job.py"
    script.write_text(f"open({str(marker)!r}, 'w').close()\n")
    result = launch("--config", str(write_config(tmp_path / "c.toml", extra=extra)), "--", str(script))
    assert result.returncode == 2
    for word in words:
        assert word in result.stderr
    assert not marker.exists()


@pytest.mark.timeout(60)
def test_two_launchers_form_one_job(tmp_path):
    cfg = write_config(tmp_path / "two-nodes.toml", ports=[free_port(), free_port()], nodes=[0, 1])
    procs = [subprocess.Popen([*LAUNCH, "--config", str(cfg), "--node-rank", str(n), *SHORT], cwd=ROOT,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for n in (0, 1)]
    try:
        outs = [p.communicate(timeout=50)[0] for p in procs]
    finally:
        for p in procs:
            p.kill()
    assert [p.returncode for p in procs] == [0, 0], outs
    assert "over 2 workers" in outs[0] and "[worker0] done:" in outs[0]
    assert "[worker1]" not in outs[0] and "[worker0]" not in outs[1]
    assert outs[1].splitlines()[-1] == "zgrad-launch: all 1 worker process(es) finished"


def test_multi_node_needs_a_fixed_rendezvous_port(tmp_path):
    result = launch("--config", str(write_config(tmp_path / "c.toml", nodes=[0, 1])), "--dry-run")
    assert result.returncode == 2 and "workers[0].port" in result.stderr


SRUN_TASK_1_OF_2_ON_ONE_MACHINE = {"SLURM_JOB_ID": "5", "SLURM_STEP_ID": "0", "SLURM_PROCID": "1", "SLURM_NTASKS": "2",
                                   "SLURM_LOCALID": "1", "SLURM_NODEID": "0", "SLURM_NNODES": "1",
                                   "SLURM_TASKS_PER_NODE": "2", "SLURM_JOB_NODELIST": "vm"}


def test_the_node_of_each_srun_task_is_its_task_rank_when_tasks_share_a_machine(tmp_path):
    # srun -n 2 on one machine: both tasks have SLURM_NODEID=0; task 1 is the config's node 1.
    cfg = write_config(tmp_path / "c.toml", ports=[free_port(), free_port()], nodes=[0, 1])
    result = launch("--config", str(cfg), "--dry-run", env={**os.environ, **SRUN_TASK_1_OF_2_ON_ONE_MACHINE})
    assert result.returncode == 0, result.stderr
    assert "[worker1]" in result.stdout and "[worker0]" not in result.stdout


def test_one_srun_task_per_worker_runs_that_worker_and_a_mismatch_is_explained(tmp_path):
    cfg = write_config(tmp_path / "c.toml", workers=2, ports=[free_port(), free_port()])
    result = launch("--config", str(cfg), "--dry-run", env={**os.environ, **SRUN_TASK_1_OF_2_ON_ONE_MACHINE})
    assert result.returncode == 0 and "[worker1]" in result.stdout and "[worker0]" not in result.stdout, result.stderr
    cfg = write_config(tmp_path / "c.toml", workers=3, ports=[free_port(), free_port(), free_port()])
    result = launch("--config", str(cfg), "--dry-run", env={**os.environ, **SRUN_TASK_1_OF_2_ON_ONE_MACHINE})
    assert result.returncode == 2
    assert "SLURM started 2 task(s), but the config has 1 node(s) and 3 worker(s)" in result.stderr


def test_dry_run_prints_the_plan_and_starts_nothing():
    result = launch("--config", str(CONFIGS / "cluster.toml"), "--dry-run")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    for word in ["[worker0]", "[worker1]", "ZGRAD_RANK=1", "ZGRAD_WORLD_SIZE=2", "ZGRAD_MASTER_PORT=",
                 f"ZGRAD_CONFIG={CONFIGS / 'cluster.toml'}", "-m zgrad.launch.demo", "dry run, nothing started"]:
        assert word in out


@pytest.mark.parametrize("name", sorted(p.name for p in CONFIGS.glob("*.toml")))
def test_check_accepts_every_shipped_config(name, tmp_path):
    config = load_config(CONFIGS / name)
    if config.security.curve:  # its key_dir is relative to where the launcher runs: make the keys there
        generate_keys(tmp_path / config.security.key_dir, len(config.workers))
    result = launch("check", str(CONFIGS / name), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[-1] == "config OK"


def test_check_names_missing_curve_keys_and_how_to_make_them(tmp_path):
    secure = str(CONFIGS / "secure.toml")
    result = launch("check", secure, cwd=tmp_path)
    assert result.returncode == 2 and result.stdout == ""
    for word in ["worker-0.key,", "worker-1.key,", "worker-0.key_secret", "worker-1.key_secret", str(tmp_path / "keys"),
                 "`zgrad-launch keygen --out keys --workers 2`"]:
        assert word in result.stderr
    assert launch("keygen", "--out", "keys", "--workers", "2", cwd=tmp_path).returncode == 0
    result = launch("check", secure, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[-1] == "config OK"
    (tmp_path / "keys" / "worker-1.key_secret").unlink()
    result = launch("--config", secure, "--dry-run", cwd=tmp_path)
    assert result.returncode == 2 and "key files worker-1.key_secret are missing" in result.stderr


def test_check_rejects_a_bad_config(tmp_path):
    result = launch("check", str(write_config(tmp_path / "c.toml", extra='\n[transport]\n')))
    assert result.returncode == 2 and "transport" in result.stderr


def test_keygen_writes_keys(tmp_path):
    result = launch("keygen", "--out", str(tmp_path / "keys"), "--workers", "2")
    assert result.returncode == 0, result.stderr
    names = sorted(p.name for p in (tmp_path / "keys").iterdir())
    assert names == ["agent.key", "agent.key_secret", "worker-0.key", "worker-0.key_secret", "worker-1.key",
                     "worker-1.key_secret"]
    again = launch("keygen", "--out", str(tmp_path / "keys"), "--workers", "2")
    assert again.returncode == 2 and "already exists" in again.stderr
