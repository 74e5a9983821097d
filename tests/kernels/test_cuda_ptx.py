"""Every CUDA kernel compiles for a real GPU (sm_90) for every dtype it supports, and no float32
kernel computes in float64.

Compiling needs Numba's real CUDA target and NVVM (the ``cuda`` extra: numba-cuda[cu13]), not a
GPU: :mod:`cuda_ptx_check` runs in a subprocess without the simulator this test session uses.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys

import pytest
from paths import REPO, SUPPORT

HERE, ROOT = SUPPORT, REPO  # the PTX check script is a helper

pytestmark = pytest.mark.skipif(importlib.util.find_spec("numba_cuda") is None,
                                reason="numba-cuda is not installed (pip install 'zgrad[cuda]')")

BAD_KERNEL = '''
from numba import cuda
def scale(x, out):
    for i in range(cuda.grid(1), out.size, cuda.gridsize(1)):
        out[i] = x[i] * 0.1 + 0.3   # Python floats: float64 arithmetic
'''


def _start(*args: str) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    return subprocess.Popen([sys.executable, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env, cwd=ROOT)


def _report(process: subprocess.Popen, timeout_s: float) -> dict:
    try:
        out, err = process.communicate(timeout=timeout_s)
    finally:
        process.kill()
    assert process.returncode == 0, err[-3000:]
    return json.loads(out.strip().splitlines()[-1])


def _run(*args: str, timeout_s: float = 300) -> dict:
    return _report(_start(*args), timeout_s)


# Compiling is CPU-bound and single-threaded: one process per core shares it.
SHARDS = max(1, min(4, os.cpu_count() or 1))


# The float64 variants compile the same sources as the float32 ones (which the float64 check is
# about): CI's full step compiles them.
@pytest.mark.timeout(900)  # the compile takes minutes of CPU on a loaded 2-core machine
@pytest.mark.parametrize("float64, at_least", [("skip", 170), pytest.param("only", 160, marks=pytest.mark.full)],
                         ids=["float32_and_integer", "float64"])
def test_every_kernel_compiles_for_sm90_without_float64_in_float32_kernels(float64, at_least):
    processes = [_start(str(HERE / "cuda_ptx_check.py"), "--shard", f"{i}/{SHARDS}", "--float64", float64)
                 for i in range(SHARDS)]
    reports = [_report(process, 840) for process in processes]
    report = {"compiled": sum(r["compiled"] for r in reports), "failures": sum((r["failures"] for r in reports), []),
              "f64": {k: v for r in reports for k, v in r["f64"].items()}, "uncovered": reports[0]["uncovered"]}
    assert not report["failures"], "\n".join(report["failures"])
    assert not report["f64"], f"float32 kernels with float64 instructions: {report['f64']}"
    assert not report["uncovered"], f"kernels the PTX check does not compile: {report['uncovered']}"
    assert report["compiled"] >= at_least, f"only {report['compiled']} kernel variants compiled"


def test_the_check_finds_float64_in_a_float32_kernel(tmp_path):
    module = tmp_path / "bad_kernel.py"
    module.write_text(BAD_KERNEL)
    script = (
        "import json, sys; sys.path.insert(0, %r)\n"
        "from numba import cuda, float32\n"
        "import bad_kernel, cuda_ptx_check\n"
        "ptx, _ = cuda.compile_ptx(bad_kernel.scale, (float32[::1], float32[::1]), cc=(9, 0))\n"
        "print(json.dumps({'f64': len(cuda_ptx_check.F64.findall(ptx))}))\n"
    ) % str(tmp_path)
    env_path = str(HERE)
    report = _run("-c", f"import sys; sys.path.insert(0, {env_path!r})\n" + script)
    assert report["f64"] > 0
