"""Test-session setup: the helpers' directory on the import path, zgrad's CUDA backend in Numba's
CUDA simulator, the ``full`` marker, and tests that compare with PyTorch carry the ``torch``
marker (they skip where torch is not installed).

The tests mirror the packages (``kernels/``, ``rpc/``, ``engine/``, ...); their shared helpers
live in ``support/``, and tests import them, and each other's case tables, by module name: the
helper directory and every test directory are on ``sys.path`` (test module names are unique).

``NUMBA_ENABLE_CUDASIM`` must be set before numba is first imported, so it is set here (when
numba-cuda is installed and no GPU run was asked for with ``ZGRAD_TEST_REAL_GPU=1``), numba.cuda
is imported under it, and the variable is removed again: worker processes the tests start
(launcher, RPC, examples) get the environment they would get outside the tests.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import pytest

_TESTS = Path(__file__).resolve().parent
for _directory in [_TESTS / "support", *sorted(p for p in _TESTS.iterdir() if p.is_dir() and p.name != "support")]:
    if _directory.name not in ("__pycache__", "plugins") and str(_directory) not in sys.path:
        sys.path.insert(0, str(_directory))


def _enable_simulator() -> bool:
    if os.environ.get("ZGRAD_TEST_REAL_GPU") == "1" or importlib.util.find_spec("numba_cuda") is None:
        return False
    had = os.environ.get("NUMBA_ENABLE_CUDASIM")
    os.environ["NUMBA_ENABLE_CUDASIM"] = "1"
    try:
        import numba.cuda  # noqa: F401 - picks the simulator now, once for the process
    finally:
        if had is None:
            del os.environ["NUMBA_ENABLE_CUDASIM"]
    return True


SIMULATOR = _enable_simulator()


# The README's test command runs every path once; ZGRAD_TEST_FULL=1 (CI's last step, `-m full`)
# also runs the tests marked ``full``: the further variants of a path already run (the CUDA
# simulator's whole op suite, float64's parallel CPU kernels, every dtype's PTX).
FULL = os.environ.get("ZGRAD_TEST_FULL") == "1"

# Tests marked ``torch`` compare with PyTorch: without it they skip (CI installs it for -m torch).
TORCH = importlib.util.find_spec("torch") is not None


def _never_read_layouts() -> None:
    """Make numpy's repr describe a DeviceArray's layout dummy instead of reading it: its data
    pointer is a fake address, and pytest shows the arguments of every frame of a failure (numpy's
    own frames get the dummies), so a failing CUDA test would crash its process instead of
    reporting. Other arrays keep numpy's repr."""
    import numpy as np
    try:
        from zgrad.kernels.cuda.array import FAKE_ADDRESS_SPAN
    except ImportError:  # no CUDA extras: no layouts
        return
    if "override_repr" not in np.get_printoptions():  # numpy < 2.0
        return
    first, end = FAKE_ADDRESS_SPAN

    def layout_safe_repr(array: np.ndarray) -> str:
        if first <= array.__array_interface__["data"][0] < end:
            return f"<device array layout: shape={array.shape}, strides={array.strides}, dtype={array.dtype}>"
        with np.printoptions(override_repr=None):
            return repr(array)

    np.set_printoptions(override_repr=layout_safe_repr)


def pytest_configure(config: pytest.Config) -> None:
    _never_read_layouts()
    config.addinivalue_line("markers", "gpu: needs a real CUDA GPU (skipped without one)")
    config.addinivalue_line("markers", "full: a further variant of a path the default run covers; runs with "
                                       "ZGRAD_TEST_FULL=1 (CI: ZGRAD_TEST_FULL=1 pytest -m full)")
    config.addinivalue_line("markers", "torch: compares with PyTorch where it is installed (CI's torch step: -m torch)")


@pytest.hookimpl(tryfirst=True)
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int | None:
    """``-n auto``: a worker per core and one more. Much of the suite waits on the processes and
    sockets it starts (launchers, ranks, RPC peers), and the extra worker uses the cores then.
    ``PYTEST_XDIST_AUTO_NUM_WORKERS`` still decides when set."""
    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS"):
        return None
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return cores + 1


# The longest test (minutes of compiling in its own processes) goes first, so that no worker is
# still running it at the end while the others have nothing left.
_FIRST = "tests/kernels/test_cuda_ptx.py"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    items.sort(key=lambda item: not item.nodeid.startswith(_FIRST))
    if not TORCH:
        no_torch = pytest.mark.skip(reason="compares with torch, which is not installed (CI's torch step runs it)")
        for item in items:
            if item.get_closest_marker("torch") is not None:
                item.add_marker(no_torch)
    if FULL:
        return
    skip = pytest.mark.skip(reason="a further variant: ZGRAD_TEST_FULL=1 runs it (CI's full step)")
    for item in items:
        if item.get_closest_marker("full") is not None:
            item.add_marker(skip)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> object:
    """A test that skips because torch is missing must carry the ``torch`` marker: CI installs
    torch and runs ``-m torch``, so an unmarked one would never be checked against PyTorch."""
    outcome = yield
    report = outcome.get_result()
    if report.skipped and isinstance(report.longrepr, tuple) and "torch" in str(report.longrepr[2]) \
            and item.get_closest_marker("torch") is None:
        report.outcome = "failed"
        report.longrepr = (f"{item.nodeid} skips without torch ({report.longrepr[2]}) but is not marked "
                           "@pytest.mark.torch, so CI's torch step (-m torch) would never run it")
