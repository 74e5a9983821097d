"""The README is true: its API table lists what the public modules export, and every ``python``
block of it runs as written."""

from __future__ import annotations

import importlib
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

from rpc_harness import free_port
import pytest
from paths import REPO

ROOT = REPO
README = ROOT / "README.md"
PYTHON_BLOCK = re.compile(r"^```python\n(.*?)^```", re.M | re.S)
BLOCK_TIMEOUT_S = 240


def api_row(module: str) -> str:
    """The text of the API table's row for ``module``."""
    for line in README.read_text(encoding="utf-8").splitlines():
        if line.startswith(f"| `{module}` |"):
            return line
    raise AssertionError(f"README.md's API table has no row for {module}")


def python_blocks() -> list[tuple[int, str]]:
    """Each ``python`` block of the README: the line its fence opens on, and its code."""
    text = README.read_text(encoding="utf-8")
    return [(text.count("\n", 0, m.start()) + 1, m.group(1)) for m in PYTHON_BLOCK.finditer(text)]


def run_script(path: Path, timeout_s: float) -> subprocess.CompletedProcess:
    """Run ``python path`` from the repository root, as a user of this checkout would, with a fresh
    rendezvous port and none of the launcher's variables; on a timeout, kill its whole session (the
    workers it spawned too) and fail."""
    env = {name: value for name, value in os.environ.items() if not name.startswith("ZGRAD_")}
    env.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()), NUMBA_NUM_THREADS="1", OMP_NUM_THREADS="1")
    proc = subprocess.Popen([sys.executable, str(path)], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        output, _ = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        output, _ = proc.communicate()
        pytest.fail(f"{path.name} ran past {timeout_s} s:\n{output[-4000:]}")
    return subprocess.CompletedProcess(proc.args, proc.returncode, output)


@pytest.mark.parametrize("module", ["zgrad.nn", "zgrad.nn.functional", "zgrad.nn.utils", "zgrad.nn.parameter",
                                    "zgrad.distributions",
                                    "zgrad.optim", "zgrad.optim.lr_scheduler", "zgrad.utils.data",
                                    "zgrad.utils.data.distributed", "zgrad.utils.checkpoint", "zgrad.amp",
                                    "zgrad.special", "zgrad.profiler", "zgrad.func", "zgrad.autograd"])
def test_api_table_lists_every_export(module):
    row = api_row(module)
    listed = set(re.findall(r"`(\w+)", row))
    exported = {name for name in importlib.import_module(module).__all__ if name not in ("functional", "init", "utils")}
    assert not exported - listed, f"README.md's {module} row misses {sorted(exported - listed)}"


def test_readme_has_the_usage_examples():
    codes = [code for _, code in python_blocks()]
    assert len(codes) >= 4
    assert any("mp.spawn(run_worker" in code for code in codes) and any("DDP(" in code for code in codes)


@pytest.mark.timeout(BLOCK_TIMEOUT_S + 30)
@pytest.mark.parametrize("line, code", python_blocks(), ids=[f"line{line}" for line, _ in python_blocks()])
def test_python_block_runs(line, code, tmp_path):
    script = tmp_path / f"readme_line{line}.py"
    script.write_text(code, encoding="utf-8")
    done = run_script(script, BLOCK_TIMEOUT_S)
    assert done.returncode == 0, f"README.md's python block at line {line} exited with {done.returncode}:\n{done.stdout[-4000:]}"


def test_a_failing_block_fails(tmp_path):
    script = tmp_path / "broken.py"
    script.write_text("import zgrad\nzgrad.undefined_name\n", encoding="utf-8")
    done = run_script(script, 60)
    assert done.returncode != 0 and "AttributeError" in done.stdout
