"""Test-session setup: zgrad's CUDA backend runs in Numba's CUDA simulator.

``NUMBA_ENABLE_CUDASIM`` must be set before numba is first imported, so it is set here (when
numba-cuda is installed and no GPU run was asked for with ``ZGRAD_TEST_REAL_GPU=1``), numba.cuda
is imported under it, and the variable is removed again: worker processes the tests start
(launcher, RPC, examples) get the environment they would get outside the tests.
"""

from __future__ import annotations

import importlib.util
import os

import pytest


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


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "gpu: needs a real CUDA GPU (skipped without one)")
    config.addinivalue_line("markers", "cuda_full: the whole op suite in the CUDA simulator (ZGRAD_CUDA_FULL=1)")
