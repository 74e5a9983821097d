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
    """What the launcher reads of a Numba device array (whose data pointer is a property of its
    class, as there)."""

    def __init__(self, shape, strides, dtype, address):
        self.shape, self.strides, self.dtype = shape, strides, np.dtype(dtype)
        self.ndim, self.size = len(shape), int(np.prod(shape))
        like = np.lib.stride_tricks.as_strided(np.empty(1, self.dtype), shape, strides)
        self.flags = {"C_CONTIGUOUS": like.flags.c_contiguous, "F_CONTIGUOUS": like.flags.f_contiguous}
        self.address = address

    @property
    def device_ctypes_pointer(self):
        return ctypes.c_void_p(self.address)


def test_an_arrays_parameters_are_numbas_abi_fields_read_once():
    array = _Array((3, 4), (32, 8), np.float64, 4096)
    assert launcher._array_fields(array) == (0, 0, 12, 8, 4096, 3, 4, 32, 8)
    array.address = 8192  # cached: an array's memory never moves
    assert launcher._array_fields(array)[4] == 4096
    assert launcher._array_fields(_Array((), (), np.int32, 64)) == (0, 0, 1, 4, 64)
    assert launcher._array_fields(_Array((0,), (4,), np.float32, 0))[:5] == (0, 0, 0, 4, 0)


def test_arguments_select_a_plan_by_their_types():
    array = _Array((5,), (4,), np.float32, 256)
    assert launcher._kind(array) == (_Array, np.dtype(np.float32), 1, True, True, False, False)
    assert launcher._kind(_Array((2, 3), (4, 8), np.float32, 256))[3:] == (False, True, False, False)
    assert launcher._kind(_Array((2, 3), (0, 4), np.float32, 256))[3:] == (False, False, True, False)
    assert launcher._kind(np.zeros(3)) is np.ndarray  # a host array: Numba's path (it copies it)
    assert launcher._kind(3) is int and launcher._kind(-(1 << 63)) is int
    assert launcher._kind(1 << 63) != int  # Numba types it as uint64: another overload
    assert launcher._kind(2.5) is float and launcher._kind(True) is bool
    assert launcher._kind(np.float32(1)) is np.float32
    assert launcher._kind((array, 2)) == (launcher._kind(array), int)
    assert launcher._kind((4, 5)) == (int, int) and launcher._kind((4, 1 << 63)) == (int, launcher._kind(1 << 63))
    assert launcher._dim3(7) == (7, 1, 1) and launcher._dim3((4, 2)) == (4, 2, 1)


_PLAN_SCRIPT = textwrap.dedent("""
    import ctypes, json, types, warnings
    import numpy as np
    from numba.cuda import dispatcher as numba_dispatcher
    from numba.cuda.cudadrv import devicearray, dummyarray
    from numba.cuda.typing.typeof import Purpose, typeof
    from zgrad.kernels.cuda import launcher

    class View:  # what cuda.core's StridedMemoryView gives Numba for a device array (no GPU here)
        def __init__(self, array):
            contiguous = devicearray.is_contiguous(array)
            self.size, self.dtype, self.shape = array.size, array.dtype, array.shape
            self.ptr = array.device_ctypes_pointer.value
            self._layout = types.SimpleNamespace(
                strides_in_bytes=None if contiguous else array.strides, is_contiguous_c=contiguous,
                is_contiguous_f=contiguous and sum(n > 1 for n in array.shape) <= 1)

    devicearray._to_strided_memory_view = lambda value, **_: (View(value), False)

    class Compiled:
        debug = cooperative = launch_config_sensitive = False
        extensions = []
        _prepare_args = numba_dispatcher._Kernel._prepare_args  # Numba's own conversion
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

    class Array:  # a device array as the launcher and Numba read it
        def __init__(self, like, strides, address=1 << 20):
            self.shape, self.strides, self.ndim, self.dtype = like.shape, strides, like.ndim, like.dtype
            self.size = like.size
            self.flags = {"C_CONTIGUOUS": like.flags.c_contiguous, "F_CONTIGUOUS": like.flags.f_contiguous}
            self.address = address
            self._numba_type_ = typeof(like, Purpose.argument)

        @property
        def device_ctypes_pointer(self):
            return ctypes.c_void_p(self.address)

    class Described:  # a device array's attributes as DeviceNDArray computes them from shape and strides
        def __init__(self, shape, strides, dtype):
            self.dtype = np.dtype(dtype)
            dummy = dummyarray.Array.from_desc(0, shape, strides, self.dtype.itemsize)
            self.shape, self.strides, self.size, self.ndim = dummy.shape, dummy.strides, dummy.size, len(shape)
            self.flags = dict(dummy.flags)
        device_ctypes_pointer = property(lambda self: ctypes.c_void_p(0))

    # Arrays of one kind must have one Numba type (DeviceNDArray's own rule), over layouts that
    # differ in what Numba reads: contiguity either way, axes of one element, zero strides, empty.
    layouts = [((6,), (4,)), ((6,), (8,)), ((6,), (0,)), ((1,), (4,)), ((1,), (0,)), ((0,), (4,)), ((0,), (0,)),
               ((2, 3), (12, 4)), ((2, 3), (4, 8)), ((2, 3), (24, 8)), ((2, 3), (0, 4)), ((2, 3), (12, 0)),
               ((1, 3), (12, 4)), ((1, 3), (40, 4)), ((3, 1), (4, 4)), ((3, 1), (4, 40)), ((1, 1), (4, 4)),
               ((1, 1), (0, 0)), ((0, 3), (12, 4)), ((0, 3), (0, 4)), ((2, 0), (4, 8)), ((), ()),
               ((2, 3, 4), (48, 16, 4)), ((2, 3, 4), (4, 8, 24)), ((2, 3, 4), (48, 4, 12)), ((2, 1, 4), (16, 0, 4))]
    numba_type = devicearray.DeviceNDArrayBase._numba_type_.func
    type_of_kind = {}
    for shape, strides in layouts:
        for dtype in (np.float32, np.int64):
            described = Described(shape, strides, dtype)
            type_of_kind.setdefault(launcher._kind(described), set()).add(numba_type(described))
    kinds_with_types = [len(numba_types) for numba_types in type_of_kind.values()]

    host = (np.zeros((2, 3), np.float32), 7, 2.5, True, np.float32(1.5), np.int32(-4), np.float16(0.5), 1 << 63,
            (np.zeros(2, np.float32), np.zeros(2, np.float32)), np.zeros((3, 2), np.float32).T, (5, 6),
            (np.float32(0.5), np.float32(0.25)), (2, 1.5))
    argtypes = tuple(typeof(a, Purpose.argument) for a in host)
    device = (Array(host[0], (12, 4)), *host[1:8], (Array(host[8][0], (4,)), Array(host[8][1], (4,), 256)),
              Array(host[9], (4, 8)), *host[10:])
    calls = []
    numba_dispatcher.launch = lambda *call: calls.append(call)
    plan = launcher.Plan.of(Dispatcher(Compiled(argtypes)), device, "stream")
    values = plan.values(device)
    plan.launch("stream", "config", device)
    row = np.zeros((1, 3), np.float32)
    one_row = launcher.Plan.of(Dispatcher(Compiled((typeof(row, Purpose.argument),))), (Array(row, (40, 4)),), "stream")
    host_array = launcher.Plan.of(Dispatcher(Compiled(argtypes)), host, "stream")  # Numba copies it each launch
    launcher._array_fields = lambda array: (0, 0, array.size, 4, 0, *array.shape, *array.strides)  # a wrong pointer
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        wrong = launcher.Plan.of(Dispatcher(Compiled(argtypes)), device, "stream")
    print(json.dumps({
        "values": [[type(v).__name__, getattr(v, "value", v)] for v in values],
        "call": [str(part) for part in calls[0][:3]], "parameters": len(calls[0]) - 3,
        "kinds_with_types": kinds_with_types,
        "one_row": one_row is not None, "wrong": wrong is not None, "host_array": host_array is not None, "warnings": [str(w.message) for w in caught],
        "config": str(numba_dispatcher.LaunchConfig(grid=launcher._dim3((4, 2)), block=launcher._dim3(256),
                                                    shmem_size=0)),
    }))
""")


def test_a_plan_passes_the_parameters_numba_would():
    """In a process with Numba's real CUDA target (no GPU needed to type and convert; cuda.core's
    view of a device array stood in for): the plan finds the compiled overload by the arguments'
    Numba types, converts each argument as Numba's ``_Kernel._prepare_args`` does, and checks that
    against it, refusing (with a warning) a plan whose parameters differ."""
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}
    run = subprocess.run([sys.executable, "-c", _PLAN_SCRIPT], capture_output=True, text=True, timeout=120, env=env,
                         check=False)
    assert run.returncode == 0, run.stderr
    result = json.loads(run.stdout.splitlines()[-1])
    array_2x3 = [["int", 0], ["int", 0], ["int", 6], ["int", 4], ["int", 1 << 20], ["int", 2], ["int", 3]]
    assert result["values"] == [
        *array_2x3, ["int", 12], ["int", 4], ["c_long", 7], ["c_double", 2.5], ["bool", True], ["c_float", 1.5],
        ["c_int", -4], ["c_ushort", 0x3800], ["c_ulong", 1 << 63],
        *[["int", 0], ["int", 0], ["int", 2], ["int", 4], ["int", 1 << 20], ["int", 2], ["int", 4]],
        *[["int", 0], ["int", 0], ["int", 2], ["int", 4], ["int", 256], ["int", 2], ["int", 4]],
        *array_2x3, ["int", 4], ["int", 8], ["c_long", 5], ["c_long", 6], ["c_float", 0.5], ["c_float", 0.25],
        ["c_long", 2], ["c_double", 1.5]]
    assert result["call"] == ["stream", "config", "the kernel"] and result["parameters"] == 45
    assert all(count == 1 for count in result["kinds_with_types"]) and len(result["kinds_with_types"]) > 20
    assert result["one_row"]  # a C-ordered array's strides are not compared: Numba's canonical ones differ there
    assert not result["wrong"] and len(result["warnings"]) == 1
    assert not result["host_array"]
    assert "direct CUDA launch is off" in result["warnings"][0] and "parameter 4" in result["warnings"][0]
    assert "grid=(4, 2, 1)" in result["config"] and "block=(256, 1, 1)" in result["config"]


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
