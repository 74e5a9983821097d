"""Direct kernel launches (``zgrad.kernels.cuda.launcher``): after Numba's first launch of a
(kernel, argument types) pair, later launches pass the parameters Numba would pass, straight to
cuda.core. Here: what picks a plan and what a device array becomes (no GPU needed), and on a real
GPU that launches take the plans and compute what Numba's path computes."""

from __future__ import annotations

import ctypes
import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from cuda_helpers import REAL_GPU, requires_cuda, requires_gpu

import zgrad
from zgrad.kernels.cuda import launcher

pytestmark = requires_cuda


def _on_a_gpu(test):
    for mark in requires_gpu:
        test = mark(test)
    return test


class _Array:
    """What the launcher reads of a Numba device array."""

    def __init__(self, shape, strides, dtype, address):
        self.shape, self.strides, self.dtype = shape, strides, np.dtype(dtype)
        self.ndim, self.size = len(shape), int(np.prod(shape))
        self.device_ctypes_pointer = ctypes.c_void_p(address)
        self._numba_type_ = ("array", self.dtype, self.ndim)


def test_an_arrays_parameters_are_numbas_abi_fields_read_once():
    array = _Array((3, 4), (32, 8), np.float64, 4096)
    assert launcher._array_fields(array) == (0, 0, 12, 8, 4096, 3, 4, 32, 8)
    array.device_ctypes_pointer = ctypes.c_void_p(8192)  # cached: an array's memory never moves
    assert launcher._array_fields(array)[4] == 4096
    assert launcher._array_fields(_Array((), (), np.int32, 64)) == (0, 0, 1, 4, 64)
    assert launcher._array_fields(_Array((0,), (4,), np.float32, 0))[:5] == (0, 0, 0, 4, 0)


def test_arguments_select_a_plan_by_their_types():
    array = _Array((5,), (4,), np.float32, 256)
    assert launcher._kind(array) == ("array", np.dtype(np.float32), 1)
    assert launcher._kind(3) is int and launcher._kind(-(1 << 63)) is int
    assert launcher._kind(1 << 63) != int  # Numba types it as uint64: another overload
    assert launcher._kind(2.5) is float and launcher._kind(True) is bool
    assert launcher._kind(np.float32(1)) is np.float32
    assert launcher._kind((array, 2)) == (launcher._kind(array), int)
    assert launcher._dim3(7) == (7, 1, 1) and launcher._dim3((4, 2)) == (4, 2, 1)


_PLAN_SCRIPT = textwrap.dedent("""
    import ctypes, json
    import numpy as np
    from numba.cuda import dispatcher as numba_dispatcher
    from numba.cuda.typing.typeof import Purpose, typeof
    from zgrad.kernels.cuda import launcher

    class Compiled:
        debug = cooperative = launch_config_sensitive = False
        def __init__(self, argument_types):
            self.argument_types = argument_types
        class _codelibrary:
            @staticmethod
            def get_cufunc():
                return type("Function", (), {"kernel": "the kernel"})()

    class Dispatcher:
        targetoptions = {}
        def __init__(self, compiled):
            self.overloads = {compiled.argument_types: compiled}

    class Array:
        shape, strides, size, ndim, dtype = (2, 3), (12, 4), 6, 2, np.dtype(np.float32)
        device_ctypes_pointer = ctypes.c_void_p(1 << 20)

    args = (np.zeros((2, 3), np.float32), 7, 2.5, True, np.float32(1.5), np.int32(-4), np.float16(0.5), 1 << 63,
            (np.zeros(2, np.float32), np.zeros(2, np.float32)))
    types = tuple(typeof(a, Purpose.argument) for a in args)
    calls = []
    numba_dispatcher.launch = lambda *call: calls.append(call)
    plan = launcher.Plan.of(Dispatcher(Compiled(types)), args)
    values = plan.values((Array(), *args[1:-1], (Array(), Array())))
    plan.launch_with("stream", "config", values)
    debug = Compiled(types)
    debug.debug = True
    print(json.dumps({
        "values": [[type(v).__name__, getattr(v, "value", v)] for v in values],
        "call": [str(part) for part in calls[0][:3]], "parameters": len(calls[0]) - 3,
        "debug_plan": launcher.Plan.of(Dispatcher(debug), args) is not None,
    }))
""")


def test_a_plan_passes_the_parameters_numba_would():
    """In a process with Numba's real CUDA target (no GPU needed to type and convert): the plan
    finds the compiled overload by the arguments' Numba types and converts each argument as
    Numba's ``_Kernel._prepare_args`` does."""
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}
    run = subprocess.run([sys.executable, "-c", _PLAN_SCRIPT], capture_output=True, text=True, timeout=120, env=env,
                         check=False)
    assert run.returncode == 0, run.stderr
    result = json.loads(run.stdout.splitlines()[-1])
    assert result["values"] == [
        ["int", 0], ["int", 0], ["int", 6], ["int", 4], ["int", 1 << 20], ["int", 2], ["int", 3], ["int", 12],
        ["int", 4], ["c_long", 7], ["c_double", 2.5], ["bool", True], ["c_float", 1.5], ["c_int", -4],
        ["c_ushort", 0x3800], ["c_ulong", 1 << 63], *2 * [["int", 0], ["int", 0], ["int", 6], ["int", 4], ["int", 1 << 20],
                                                      ["int", 2], ["int", 3], ["int", 12], ["int", 4]]]
    assert result["call"] == ["stream", "config", "the kernel"] and result["parameters"] == 34
    assert not result["debug_plan"]  # a debug build checks its error flag after each launch: Numba's path


@pytest.mark.skipif(REAL_GPU, reason="the simulator's path")
def test_the_simulator_launches_through_numba():
    before = launcher.plans()
    (zgrad.ones(5, device="cuda") * 2).sum().item()
    assert launcher.plans() == before == 0


@pytest.mark.parametrize("dtype", [zgrad.float32, zgrad.float64, zgrad.float16, zgrad.int64])
@_on_a_gpu
def test_launches_after_the_first_take_the_plan_and_match_the_cpu(dtype):
    rng = np.random.default_rng(0)
    data = (rng.standard_normal((33, 65)) * 10).astype(dtype)
    x = zgrad.tensor(data)
    for _ in range(3):  # the first launch of each kernel goes through Numba, the later ones through plans
        d = zgrad.tensor(data, device="cuda")
        results = [(d * 3 + 1), d[:, ::2].sum(0), d.t().contiguous(), d.max(1).values, d.clamp(-1, 2),
                   (d > 0).sum(), d.cumsum(1)]
        expected = [(x * 3 + 1), x[:, ::2].sum(0), x.t().contiguous(), x.max(1).values, x.clamp(-1, 2),
                    (x > 0).sum(), x.cumsum(1)]
        for got, want in zip(results, expected):
            np.testing.assert_allclose(got.cpu().to(zgrad.float64).numpy(), want.to(zgrad.float64).numpy(),
                                       rtol=2e-3 if dtype == zgrad.float16 else 1e-5, atol=1e-3)
    assert launcher.plans() > 0
