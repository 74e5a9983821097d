"""The data-parallel demo through zgrad-launch: configs/ddp.toml over tcp, ipc and inproc, and
over two network namespaces joined by a veth pair (two hosts for real: one launcher in each;
skipped where namespaces cannot be made)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from netns import two_hosts  # noqa: F401 - a fixture
from test_launch import CONFIGS, LAUNCH, ROOT, free_port, launch, write_config

DDP_SHORT = ["--", "zgrad.launch.ddp_demo", "--epochs", "2", "--samples", "1000", "--no-target"]


@pytest.mark.timeout(120)
def test_ddp_demo_reaches_the_single_process_accuracy():
    single = subprocess.run([*LAUNCH[:1], "-m", "zgrad.demo"], capture_output=True, text=True, timeout=100, cwd=ROOT)
    assert single.returncode == 0, single.stdout + single.stderr
    result = launch("--config", str(CONFIGS / "ddp.toml"), timeout=100)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "[worker0] data-parallel MLP over 2 workers, batch 64 (32 per worker)" in result.stdout
    assert "reached the 90% target" in result.stdout
    # the same steps on the same batches: the same loss curve and accuracy as one process
    final = [line.split("]", 1)[1].split("in ")[0].strip() for line in result.stdout.splitlines() if "] done:" in line]
    assert final == [single.stdout.splitlines()[-1].split("in ")[0].strip()]
    losses = [line.split("loss ")[1].split()[0] for line in result.stdout.splitlines() if "] epoch" in line]
    assert losses == [line.split("loss ")[1].split()[0] for line in single.stdout.splitlines() if line.startswith("epoch")]


@pytest.mark.timeout(90)
@pytest.mark.parametrize("kind", ["ipc", "inproc"])
def test_short_ddp_demo_over_ipc_and_inproc(tmp_path, kind):
    result = launch("--config", str(write_config(tmp_path / f"{kind}.toml", kind, workers=2)), *DDP_SHORT, timeout=80)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "[worker0] epoch  2 " in result.stdout and "[worker0] done:" in result.stdout


# --- two hosts: network namespaces ---------------------------------------------------------------


def two_host_config(path: Path, addresses: list[str]) -> Path:
    """One worker per namespace; every address fixed (rendezvous ports too); cross-memory attach
    off, so the bytes cross the veth link as they would between machines."""
    ports = [free_port(), free_port()]
    text = (f'[job]\nname = "t{os.getpid()}-netns"\n\n[transport]\nkind = "tcp"\nbind_address = "0.0.0.0"\n'
            f'cma = "off"\nconnect_timeout_s = 30.0\n\n[ddp]\nmaster_port = {free_port()}\n')
    for rank, (address, port) in enumerate(zip(addresses, ports)):
        text += f'\n[[workers]]\nname = "worker{rank}"\nhost = "{address}"\nport = {port}\nnode = {rank}\n'
    path.write_text(text)
    return path


@pytest.mark.timeout(150)
@pytest.mark.parametrize("entry", ["zgrad.launch.ddp_demo", "zgrad.launch.demo"], ids=["ddp", "model-parallel"])
def test_two_launchers_in_two_network_namespaces_train_together(tmp_path, two_hosts, entry):
    names, addresses = two_hosts
    cfg = two_host_config(tmp_path / "two-hosts.toml", addresses)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    args = ["--", entry, "--epochs", "2", "--samples", "1000", "--no-target"]
    procs = [subprocess.Popen(["ip", "netns", "exec", name, *LAUNCH, "--config", str(cfg), "--node-rank", str(rank), *args],
                              cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
             for rank, name in enumerate(names)]
    try:
        outs = [p.communicate(timeout=130)[0] for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait(10)
    assert [p.returncode for p in procs] == [0, 0], outs
    assert "over 2 workers" in outs[0] and "[worker0] done:" in outs[0]
    assert "[worker1]" not in outs[0] and "[worker0]" not in outs[1]


NO_ARGUMENTS = """
import zgrad, zgrad.distributed as dist
from zgrad.distributed import rpc
dist.init_process_group()          # everything from zgrad-launch's environment
rpc.init_rpc()                     # and RPC beside it, on its own mesh
t = zgrad.ones(3) * (dist.get_rank() + 1)
dist.all_reduce(t)
print("sum", t.tolist(), "of", dist.get_world_size(), flush=True)
rpc.shutdown()
dist.destroy_process_group()
"""


@pytest.mark.timeout(60)
def test_init_process_group_without_arguments_under_zgrad_launch_beside_init_rpc(tmp_path):
    script = tmp_path / "job.py"
    script.write_text(NO_ARGUMENTS)
    result = launch("--config", str(write_config(tmp_path / "c.toml", workers=3)), "--", str(script), timeout=50)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.count("sum [6.0, 6.0, 6.0] of 3") == 3


def test_the_launcher_gives_the_process_group_its_own_rendezvous(tmp_path):
    result = launch("--config", str(CONFIGS / "ddp.toml"), "--dry-run")
    assert result.returncode == 0, result.stderr
    assert "ZGRAD_PG_MASTER_PORT=" in result.stdout and "ZGRAD_PG_MASTER_ADDR=127.0.0.1" in result.stdout
    fixed = write_config(tmp_path / "fixed.toml", ports=[free_port(), free_port()], nodes=[0, 1],
                         extra="\n[ddp]\nmaster_port = 29999\n")
    assert "ZGRAD_PG_MASTER_PORT=29999" in launch("--config", str(fixed), "--dry-run").stdout
    unset = write_config(tmp_path / "unset.toml", ports=[free_port(), free_port()], nodes=[0, 1])
    assert "ZGRAD_PG_MASTER_PORT" not in launch("--config", str(unset), "--dry-run").stdout  # several nodes: no guess
