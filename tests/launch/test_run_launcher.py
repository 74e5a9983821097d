"""``zgrad-run`` (``python -m zgrad.distributed.run``): torchrun's flags and environment, nodes
that find each other, restarts that resume, failures that are named, nothing left behind."""

from __future__ import annotations

import json
import os
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
from helpers import require_torch
from netns import two_hosts  # noqa: F401 - a fixture
from run_harness import HERE, REPO, Launch, launcher_env, launches, wait_gone

pytestmark = pytest.mark.timeout(300)

# Each line leaves in one write: torchrun's workers share the launcher's output pipe, and under
# PYTHONUNBUFFERED (as CI runs) print's text and newline are two writes another worker can split.
ENV_SCRIPT = """
import json, os, sys
keys = {keys!r}
os.write(1, ("ENV " + json.dumps({{k: os.environ.get(k) for k in keys}}, sort_keys=True) + "\\n").encode())
os.write(1, ("ARGV " + json.dumps(sys.argv[1:]) + "\\n").encode())
"""
TORCHRUN_VARS = ["RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "GROUP_WORLD_SIZE", "ROLE_RANK",
                 "ROLE_WORLD_SIZE", "ROLE_NAME", "MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_RESTART_COUNT",
                 "TORCHELASTIC_MAX_RESTARTS", "TORCHELASTIC_RUN_ID", "OMP_NUM_THREADS"]
ZGRAD_VARS = ["ZGRAD_RANK", "ZGRAD_WORLD_SIZE", "ZGRAD_MASTER_ADDR", "ZGRAD_MASTER_PORT", "ZGRAD_PG_MASTER_PORT",
              "NUMBA_NUM_THREADS"]
FAILING_SCRIPT = """
import os, sys, time
rank, attempt = int(os.environ["RANK"]), int(os.environ["TORCHELASTIC_RESTART_COUNT"])
print(f"rank {rank} attempt {attempt} port {os.environ['MASTER_PORT']}", flush=True)
if rank == 1 and attempt < int(sys.argv[1]):
    raise ValueError(f"boom on attempt {attempt}")
time.sleep(0.5)
"""
SLEEPER = "import os, time\nprint('up', os.environ['RANK'], flush=True)\ntime.sleep(300)\n"


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def environments(output: str) -> list[dict]:
    return sorted((json.loads(line[4:]) for line in output.splitlines() if line.startswith("ENV ")),
                  key=lambda env: int(env["RANK"]))


def run(args: list[str], cwd: Path, timeout_s: float = 120.0, **env: str) -> tuple[int, str]:
    launch = Launch(args, cwd, launcher_env(**env))
    with launches(launch):
        return launch.finish(timeout_s), launch.output


def test_each_worker_gets_torchruns_variables_and_zgrads(tmp_path):
    script = write(tmp_path / "env.py", ENV_SCRIPT.format(keys=TORCHRUN_VARS + ZGRAD_VARS))
    code, output = run(["--standalone", "--nproc-per-node", "2", str(script), "a", "--b"], tmp_path)
    assert code == 0, output
    envs = environments(output)
    assert [e["RANK"] for e in envs] == ["0", "1"] and [e["LOCAL_RANK"] for e in envs] == ["0", "1"]
    for env in envs:
        assert env["WORLD_SIZE"] == env["LOCAL_WORLD_SIZE"] == env["ROLE_WORLD_SIZE"] == env["ZGRAD_WORLD_SIZE"] == "2"
        assert env["GROUP_RANK"] == "0" and env["GROUP_WORLD_SIZE"] == "1" and env["ROLE_NAME"] == "default"
        assert env["ROLE_RANK"] == env["RANK"] == env["ZGRAD_RANK"]
        assert env["TORCHELASTIC_RESTART_COUNT"] == env["TORCHELASTIC_MAX_RESTARTS"] == "0"
        assert env["OMP_NUM_THREADS"] == "1"
        assert env["MASTER_PORT"] == env["ZGRAD_MASTER_PORT"] != env["ZGRAD_PG_MASTER_PORT"]
    assert len({e["TORCHELASTIC_RUN_ID"] for e in envs}) == 1
    assert output.count('ARGV ["a", "--b"]') == 2


@pytest.mark.torch
def test_the_same_script_sees_the_same_environment_under_torchrun(tmp_path):
    require_torch()
    script = write(tmp_path / "env.py", ENV_SCRIPT.format(keys=TORCHRUN_VARS))
    args = ["--nnodes", "1", "--nproc_per_node", "2", "--max-restarts", "2", "--rdzv-backend", "c10d",
            "--rdzv-endpoint", f"127.0.0.1:{free_port()}", "--rdzv-id", "same-job", str(script)]
    ours, our_output = run(args, tmp_path)
    args[args.index("--rdzv-endpoint") + 1] = f"127.0.0.1:{free_port()}"
    launch = Launch(args, tmp_path, launcher_env(), module="torch.distributed.run")
    with launches(launch):
        theirs = launch.finish(180.0)
    assert ours == theirs == 0, launch.output
    differ = {"MASTER_ADDR", "MASTER_PORT"}  # each launcher's own choice of where rank 0 listens

    def comparable(output):
        return [{k: v for k, v in env.items() if k not in differ} for env in environments(output)]

    assert comparable(our_output) == comparable(launch.output)
    assert comparable(our_output)[1]["TORCHELASTIC_RUN_ID"] == "same-job"


def test_two_launchers_form_one_job_over_c10d_and_static(tmp_path):
    script = write(tmp_path / "env.py", ENV_SCRIPT.format(keys=TORCHRUN_VARS))
    for backend in ("c10d", "static"):
        port = free_port()
        common = ["--nnodes", "2", "--nproc-per-node", "2", "--rdzv-backend", backend, "--rdzv-id", "two"]
        where = ["--rdzv-endpoint", f"127.0.0.1:{port}"] if backend == "c10d" else ["--master-port", str(port)]
        nodes = [Launch([*common, *where, *(["--node-rank", str(1 - n)] if backend == "static" else []), str(script)],
                        tmp_path) for n in range(2)]
        with launches(*nodes):
            codes = [node.finish() for node in nodes]
        output = "\n".join(node.output for node in nodes)
        assert codes == [0, 0], output
        envs = environments(output)
        assert [e["RANK"] for e in envs] == ["0", "1", "2", "3"]
        assert {e["WORLD_SIZE"] for e in envs} == {"4"} and len({e["MASTER_PORT"] for e in envs}) == 1
        assert [e["GROUP_RANK"] for e in envs] == ["0", "0", "1", "1"]
        if backend == "static":  # the node given --node-rank 0 (started second) holds ranks 0 and 1
            assert sorted(environments(nodes[1].output), key=lambda e: e["RANK"])[0]["RANK"] == "0"


def final_weights(path: Path) -> dict[str, np.ndarray]:
    return {name: value.numpy() for name, value in zgrad.load(path).items()}


def test_a_killed_worker_resumes_from_the_snapshot_and_ends_where_an_uninterrupted_run_does(tmp_path):
    trainer = str(HERE / "elastic_trainer.py")
    plain, killed = tmp_path / "plain", tmp_path / "killed"
    plain.mkdir()
    killed.mkdir()
    code, output = run(["--standalone", "--nproc-per-node", "2", trainer, "4", "snap.pt", "final.pt"], plain)
    assert code == 0, output
    launch = Launch(["--standalone", "--nproc-per-node", "2", "--max-restarts", "1", trainer, "4", "snap.pt",
                     "final.pt", "2"], killed)
    with launches(launch):
        first_pids = {int(launch.wait_for(rf"rank {r} pid (\d+) attempt 0").group(1)) for r in (0, 1)}
        launch.wait_for(r"saved epoch 1")
        launch.wait_for(r"rank 1 holding at epoch 2")  # the first attempt waits there to be killed
        victim = int(launch.wait_for(r"rank 1 pid (\d+) attempt 0").group(1))
        os.kill(victim, signal.SIGKILL)
        launch.wait_for(r"rank 1 resuming at epoch 2")
        assert launch.finish() == 0, launch.output
    assert wait_gone(list(first_pids)) == []
    ours, want = final_weights(killed / "final.pt"), final_weights(plain / "final.pt")
    assert sorted(ours) == sorted(want)
    for name in want:
        np.testing.assert_array_equal(ours[name], want[name])


def test_the_tutorials_torchrun_program_resumes_from_its_snapshot_after_a_worker_is_killed(tmp_path):
    tutorial = REPO / "examples" / "ddp_tutorial"
    for name in ("multigpu_torchrun.py", "datautils.py"):
        (tmp_path / name).write_text((tutorial / name).read_text())
    # The program runs on while the test reads its output, so the kill lands at an epoch the test
    # does not choose: any one after the first snapshot, before the last of many epochs.
    epochs = 20
    launch = Launch(["--standalone", "--nproc-per-node", "2", "--max-restarts", "1", "multigpu_torchrun.py",
                     str(epochs), "1"], tmp_path)
    with launches(launch):
        launch.wait_for(r"Epoch 1 \| Training snapshot saved at snapshot.pt")
        workers = launch.workers()
        os.kill(workers[1], signal.SIGKILL)
        resumed = int(launch.wait_for(r"Resuming training from snapshot at Epoch (\d+)").group(1))
        assert launch.finish() == 0, launch.output
    assert 1 <= resumed < epochs
    assert f"Epoch {epochs - 1} | Training snapshot saved at snapshot.pt" in launch.output
    assert zgrad.load(tmp_path / "snapshot.pt")["EPOCHS_RUN"] == epochs - 1


def test_a_worker_failing_every_attempt_uses_up_the_restarts_and_the_summary_names_it(tmp_path):
    script = write(tmp_path / "fail.py", FAILING_SCRIPT)
    code, output = run(["--standalone", "--nproc-per-node", "2", "--max-restarts", "1", str(script), "9"], tmp_path)
    assert code == 1, output
    ports = {line.split()[-1] for line in output.splitlines() if line.startswith("rank ") and "attempt 1" in line}
    first = {line.split()[-1] for line in output.splitlines() if line.startswith("rank ") and "attempt 0" in line}
    assert len(ports) == len(first) == 1 and ports != first  # a restarted round never dials the dead round's port
    summary = output[output.index(f"{script} FAILED"):]
    assert "rank      : 1 (local_rank: 1)" in summary
    assert "error     : ValueError: boom on attempt 1" in summary
    assert "error     : ValueError: boom on attempt 0" in summary
    assert "no restarts left (--max-restarts 1)" in summary


def test_a_failure_restarts_the_round_and_the_job_then_succeeds(tmp_path):
    script = write(tmp_path / "fail.py", FAILING_SCRIPT)
    code, output = run(["--standalone", "--nproc-per-node", "2", "--max-restarts", "2", str(script), "1"], tmp_path)
    assert code == 0, output
    assert "rank 1 attempt 1" in output and "FAILED" not in output


def test_a_node_that_never_joins_fails_the_other_after_the_join_timeout(tmp_path):
    script = write(tmp_path / "env.py", ENV_SCRIPT.format(keys=["RANK"]))
    code, output = run(["--nnodes", "2", "--nproc-per-node", "1", "--rdzv-backend", "c10d", "--rdzv-endpoint",
                        f"127.0.0.1:{free_port()}", "--rdzv-conf", "join_timeout=2", str(script)], tmp_path)
    assert code == 1, output
    assert "rendezvous timed out: 1 of at least 2 node(s) joined round 0 within join_timeout=2 s" in output
    assert "ENV" not in output


def wait_listening(port: int, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    pytest.fail(f"nothing listened at 127.0.0.1:{port} within {timeout_s:g} s")


@pytest.mark.parametrize("dies", ["joining node", "hosting node"])
def test_a_node_whose_agent_dies_is_noticed_by_the_other(tmp_path, dies):
    script = write(tmp_path / "sleep.py", SLEEPER)
    port = free_port()
    common = ["--nnodes", "2", "--nproc-per-node", "1", "--rdzv-backend", "c10d", "--rdzv-endpoint",
              f"127.0.0.1:{port}", "--rdzv-conf", "keep_alive_interval=0.5,keep_alive_max_attempt=4",
              "--shutdown-timeout", "2", str(script)]
    host = Launch(common, tmp_path)
    wait_listening(port)
    other = Launch(common, tmp_path)
    victim, survivor = (other, host) if dies == "joining node" else (host, other)
    with launches(host, other):
        host.wait_for(r"up \d")
        other.wait_for(r"up \d")
        workers = list(host.workers().values()) + list(other.workers().values())
        victim.proc.kill()
        assert survivor.finish() == 1, survivor.output
    if dies == "joining node":
        assert "its agent stopped answering for 2 s" in survivor.output
    else:
        assert f"the rendezvous host at 127.0.0.1:{port} stopped answering for 2 s" in survivor.output
    assert len(workers) == 2 and wait_gone(workers) == []


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT, signal.SIGKILL])
def test_a_signalled_launcher_stops_every_worker_and_a_sigkilled_one_leaves_none_behind(tmp_path, signum):
    script = write(tmp_path / "sleep.py", SLEEPER)
    launch = Launch(["--standalone", "--nproc-per-node", "2", str(script)], tmp_path)
    with launches(launch):
        launch.wait_for(r"up 0")
        launch.wait_for(r"up 1")
        workers = list(launch.workers().values())
        launch.proc.send_signal(signum)
        code = launch.finish()
    assert code == (-signal.SIGKILL if signum == signal.SIGKILL else 128 + signum)
    assert len(workers) == 2 and wait_gone(workers) == []


def test_flags_take_both_spellings_and_the_pet_environment_and_unknown_ones_are_refused(tmp_path):
    script = write(tmp_path / "env.py", ENV_SCRIPT.format(keys=["RANK", "LOCAL_WORLD_SIZE", "ROLE_NAME"]))
    code, output = run(["--nproc_per_node", "2", "--role", "trainer", str(script)], tmp_path)
    assert code == 0 and [e["LOCAL_WORLD_SIZE"] for e in environments(output)] == ["2", "2"], output
    assert {e["ROLE_NAME"] for e in environments(output)} == {"trainer"}
    code, output = run([str(script)], tmp_path, PET_NPROC_PER_NODE="3")
    assert code == 0 and len(environments(output)) == 3, output
    code, output = run(["--bogus-flag", "1", str(script)], tmp_path)
    assert code == 2 and "unrecognized arguments: --bogus-flag" in output, output
    code, output = run(["--nnodes", "2:1", str(script)], tmp_path)
    assert code == 2 and "--nnodes '2:1': need 1 <= MIN <= MAX" in output, output
    code, output = run(["--rdzv-backend", "etcd", str(script)], tmp_path)
    assert code == 2 and "--rdzv-backend 'etcd' is not supported" in output, output


def test_module_entry_redirects_tee_and_the_local_ranks_filter(tmp_path):
    (tmp_path / "pkg").mkdir()
    write(tmp_path / "pkg" / "__init__.py", "")
    write(tmp_path / "pkg" / "hello.py", "import os, sys\nprint('out', os.environ['LOCAL_RANK'], flush=True)\n"
                                         "print('err', os.environ['LOCAL_RANK'], file=sys.stderr, flush=True)\n")
    logs = tmp_path / "logs"
    code, output = run(["--nproc-per-node", "2", "--log-dir", str(logs), "-r", "0:2", "-t", "1:1",
                        "--local-ranks-filter", "1", "-m", "pkg.hello"], tmp_path, PYTHONPATH=os.pathsep.join(
                            [str(tmp_path), str(REPO), str(HERE)]))
    assert code == 0, output
    assert "[default1]:out 1" in output and "err 0" not in output and "out 0" not in output
    files = {p.relative_to(logs).as_posix().split("/", 1)[1]: p.read_text() for p in logs.rglob("*.log")}
    assert files == {"attempt_0/0/stderr.log": "err 0\n", "attempt_0/1/stdout.log": "out 1\n"}


def test_zgrad_launch_restarts_a_failed_round(tmp_path):
    script = write(tmp_path / "fail.py", FAILING_SCRIPT.replace('os.environ["RANK"]', 'os.environ["ZGRAD_RANK"]')
                   .replace("os.environ['MASTER_PORT']", "os.environ['ZGRAD_MASTER_PORT']"))
    config = write(tmp_path / "job.toml", f'[job]\nname = "restarts"\nentry = "{script}"\nargs = ["1"]\n'
                   '[[workers]]\nname = "worker0"\n[[workers]]\nname = "worker1"\n')
    proc = subprocess.run([sys.executable, "-m", "zgrad.launch.cli", "--config", str(config), "--max-restarts", "1"],
                          cwd=tmp_path, env=launcher_env(), capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "[worker1] rank 1 attempt 1" in proc.stdout
    assert proc.stdout.splitlines()[-1] == "zgrad-launch: all 2 worker process(es) finished"


def test_backend_queries_answer_as_pytorchs(monkeypatch):
    import zgrad.distributed as dist

    assert dist.is_gloo_available() and not dist.is_nccl_available() and not dist.is_mpi_available()
    assert dist.get_default_backend_for_device("cpu") == "gloo"
    assert dist.get_default_backend_for_device(zgrad.device("cuda:0")) == "nccl"
    with pytest.raises(ValueError, match="Default backend not registered for device : xla"):
        dist.get_default_backend_for_device("xla")
    monkeypatch.delenv("TORCHELASTIC_RUN_ID", raising=False)
    assert not dist.is_torchelastic_launched()
    monkeypatch.setenv("TORCHELASTIC_RUN_ID", "job")
    assert dist.is_torchelastic_launched()


def test_two_launchers_on_two_hosts_joined_by_a_veth_pair_train_together(tmp_path, two_hosts):
    (names, addresses), port = two_hosts, free_port()
    config = write(tmp_path / "hosts.toml", '[transport]\nkind = "tcp"\nbind_address = "0.0.0.0"\ncma = "off"\n'
                   'connect_timeout_s = 30.0\n')
    args = ["--nnodes", "2", "--nproc-per-node", "1", "--rdzv-backend", "c10d", "--rdzv-endpoint",
            f"{addresses[0]}:{port}", "--config", str(config), str(HERE / "elastic_trainer.py"), "3", "snap.pt", "final.pt"]
    nodes = [subprocess.Popen(["ip", "netns", "exec", name, sys.executable, "-m", "zgrad.distributed.run", *args],
                              cwd=tmp_path, env=launcher_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
             for name in names]
    try:
        outputs = [node.communicate(timeout=150)[0] for node in nodes]
    finally:
        for node in nodes:
            if node.poll() is None:
                node.kill()
                node.wait(10)
    assert [node.returncode for node in nodes] == [0, 0], outputs
    # c10d gives group ranks in join order: either host may hold rank 0
    assert sorted(next(line for line in out.splitlines() if line.endswith("epoch 2")) for out in outputs) == \
        ["rank 0 epoch 2", "rank 1 epoch 2"]
    plain = tmp_path / "plain"
    plain.mkdir()
    code, output = run(["--standalone", "--nproc-per-node", "2", str(HERE / "elastic_trainer.py"), "3", "snap.pt",
                        "final.pt"], plain)
    assert code == 0, output
    want, got = final_weights(plain / "final.pt"), final_weights(tmp_path / "final.pt")
    for name in want:
        np.testing.assert_array_equal(got[name], want[name])


def test_a_curve_job_rendezvous_and_trains_with_the_agents_key_pair(tmp_path):
    from zgrad.transport import generate_keys

    generate_keys(tmp_path / "keys", 2)
    config = write(tmp_path / "secure.toml", '[security]\ncurve = true\nkey_dir = "keys"\n')
    script = write(tmp_path / "env.py", ENV_SCRIPT.format(keys=["RANK"]))
    common = ["--nnodes", "2", "--nproc-per-node", "1", "--rdzv-backend", "c10d", "--rdzv-endpoint",
              f"127.0.0.1:{free_port()}", "--config", str(config)]
    nodes = [Launch([*common, str(script)], tmp_path) for _ in range(2)]
    with launches(*nodes):
        assert [node.finish() for node in nodes] == [0, 0], [node.output for node in nodes]
    assert [e["RANK"] for e in environments("\n".join(node.output for node in nodes))] == ["0", "1"]
    (tmp_path / "keys" / "agent.key_secret").unlink()
    code, output = run([*common[:-2], "--config", str(config), str(script)], tmp_path)
    assert code == 2 and "agent.key_secret" in output and "zgrad-launch keygen" in output
