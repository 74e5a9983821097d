"""The host-allocator tuning of ``init_rpc``, ``init_process_group``, the first backward pass and
the first DataLoader iterator: freed tensor memory is reused, not faulted in again.

Each case runs in a fresh interpreter (malloc settings are process-wide) and counts minor page
faults (``ru_minflt``) over repeated allocate/free cycles of 4 MiB arrays (64 MiB ones too, over
glibc's largest mmap threshold): with glibc's defaults an mmapped block is returned on free and its
pages fault in again on the next allocation.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import textwrap

import pytest

from zgrad.kernels import host_memory
from zgrad.kernels.host_memory import TUNE_ENVIRONMENT_VARIABLE, tune_host_allocator

glibc_only = pytest.mark.skipif(
    platform.system() != "Linux" or platform.libc_ver()[0] != "glibc", reason="malloc tuning is glibc-only"
)

_CYCLES = 20
_PAGES_PER_ARRAY = (4 << 20) // 4096

_PROBE = textwrap.dedent(
    """
    import json, resource, sys
    import numpy as np
    from zgrad.kernels.host_memory import tune_host_allocator
    tuned = tune_host_allocator(256) if sys.argv[1] == "tuned" else False
    if sys.argv[1] == "backward":
        import zgrad
        (zgrad.ones(3, requires_grad=True) * 2).sum().backward()
    if sys.argv[1] == "loader":
        import zgrad.utils.data
        iter(zgrad.utils.data.DataLoader(zgrad.utils.data.TensorDataset(zgrad.ones(4)), batch_size=2))
    mib = int(sys.argv[2]) if len(sys.argv) > 2 else 4
    def cycle():
        a = np.ones((mib << 8, 1024), dtype=np.float32)  # mib MiB, written in full
        b = a * 2.0
        del a, b
    cycle()
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(%d):
        cycle()
    print(json.dumps({"tuned": tuned, "faults": resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before}))
    """
    % _CYCLES
)


def _faults(mode: str, env: dict | None = None, mib: int = 4) -> dict:
    out = subprocess.run([sys.executable, "-c", _PROBE, mode, str(mib)], capture_output=True, text=True, timeout=60,
                         check=True, env=env)
    return json.loads(out.stdout)


@glibc_only
def test_tuned_allocator_reuses_freed_pages():
    default, tuned = _faults("default"), _faults("tuned")
    assert tuned["tuned"] is True
    # Two 4 MiB arrays per cycle: with the defaults at least one of them is faulted in afresh
    # every cycle (measured: 20,368 faults for 20 cycles); tuned, the first cycle's pages serve all.
    assert default["faults"] > _CYCLES * _PAGES_PER_ARRAY // 2, default
    assert tuned["faults"] < _PAGES_PER_ARRAY, tuned


@glibc_only
def test_tuned_allocator_reuses_blocks_over_the_mmap_threshold():
    """64 MiB arrays, which glibc maps on their own whatever the threshold, come from the heap too."""
    default, tuned = _faults("default", mib=64), _faults("tuned", mib=64)
    # At least one fault per 2 MiB of each cycle's fresh block, even where huge pages serve it
    # (measured with 4 KiB pages: 11,540 faults for 20 cycles); tuned, about none.
    assert default["faults"] > _CYCLES * 32, default
    assert tuned["faults"] < _PAGES_PER_ARRAY, tuned


@glibc_only
def test_tune_is_idempotent_and_checks_its_argument():
    assert tune_host_allocator(256) is True
    assert tune_host_allocator(256) is True
    with pytest.raises(ValueError, match="keep_free_mb"):
        tune_host_allocator(-1)


@glibc_only
@pytest.mark.parametrize("setting", [None, "0"], ids=["default", "declined"])
@pytest.mark.parametrize("workload", ["backward", "loader"])
def test_the_first_backward_pass_or_loader_tunes_the_allocator_unless_declined(workload, setting):
    """A loader's batches are allocated and freed every step as a backward pass's tensors are."""
    env = {k: v for k, v in os.environ.items() if k != TUNE_ENVIRONMENT_VARIABLE}
    if setting is not None:
        env[TUNE_ENVIRONMENT_VARIABLE] = setting
    faults = _faults(workload, env)["faults"]
    if setting is None:
        assert faults < _PAGES_PER_ARRAY, faults
    else:
        assert faults > _CYCLES * _PAGES_PER_ARRAY // 2, faults


def test_init_without_tuning_leaves_a_later_backward_pass_alone(monkeypatch):
    monkeypatch.setattr(host_memory, "_settled", False)
    calls = []
    monkeypatch.setattr(host_memory, "tune_host_allocator", lambda keep_free_mb: calls.append(keep_free_mb))
    host_memory.leave_host_allocator()
    host_memory.tune_for_training()
    assert calls == []
    monkeypatch.setattr(host_memory, "_settled", False)
    monkeypatch.delenv(TUNE_ENVIRONMENT_VARIABLE, raising=False)
    host_memory.tune_for_training()
    assert calls == [host_memory.DEFAULT_KEEP_FREE_MB]
