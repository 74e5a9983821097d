"""Check the Numba side of zgrad's pool allocator without a GPU: install it, make its memory
manager for a stand-in context with the driver replaced by a recorder, allocate, drop the
allocation, and print the driver calls and what the manager returned as JSON.

Run as a script (by tests/kernels/test_cuda_memory_pool.py) in a process without
NUMBA_ENABLE_CUDASIM: it needs Numba's real CUDA driver module, not the simulator's.
"""

from __future__ import annotations

import gc
import json
import os
import sys
import types


def main() -> int:
    if os.environ.get("NUMBA_ENABLE_CUDASIM"):
        print("cuda_memory_manager_check needs Numba's real CUDA target: unset NUMBA_ENABLE_CUDASIM", file=sys.stderr)
        return 2
    from numba.cuda.cudadrv import driver as numba_driver

    from zgrad.kernels.cuda import memory_pool

    calls = []
    stream = types.SimpleNamespace(handle="stream")

    class Recorder:
        def __getattr__(self, name):
            def call(*args):
                calls.append([name, *map(str, args)])
                return {"cuMemAllocAsync": 0x7000, "cuMemGetInfo": (1, 2), "cuDeviceGetDefaultMemPool": "pool"}.get(name)
            return call

    numba_driver.driver = Recorder()
    installed = memory_pool.install(lambda: stream, lambda: stream)
    manager_class = numba_driver._memory_manager
    class Context:  # Numba's managers hold a weak proxy of their context
        device = types.SimpleNamespace(MEMORY_POOLS_SUPPORTED=1, id=0)

    context = Context()
    manager = manager_class(context=context)
    manager.initialize()
    manager.initialize()  # Numba calls it on every push of the context: once is what counts
    memory = manager.memalloc(256)
    result = {"installed": installed, "manager": manager_class.__name__, "pointer": int(memory.device_pointer),
              "size": memory.size, "freed_at_exit": memory._finalizer.atexit}
    del memory
    gc.collect()
    result["vectors"] = _device_vectors(context, manager, stream)
    result["reuse"] = _reuse(calls)
    result["calls"] = calls
    print(json.dumps(result))
    return 0


def _device_vectors(context, manager, stream) -> list:
    """For a few lengths and dtypes: whether ``runtime.device_vector``'s array (memory from the
    context's manager directly) has every field Numba's own ``device_array`` path gives it, and its
    length, dtype and memory's size."""
    import numpy as np
    from numba import cuda
    from numba.cuda.cudadrv import devicearray, devices

    from zgrad.kernels.cuda import runtime

    context.memalloc = manager.memalloc
    cuda.current_context = devices.get_context = lambda devnum=None: context
    runtime._local.stream = stream

    def fields(array):
        return [list(array.shape), list(array.strides), str(array.dtype), array.size, array.alloc_size, array.ndim,
                str(array._numba_type_), dict(array.flags), array.stream is stream, array.gpu_data.size]

    found = []
    for length, dtype in ((5, np.float32), (1, np.float64), (7, np.uint16), (3, np.bool_)):
        mine = runtime.device_vector(length, np.dtype(dtype))
        numbas = devicearray.DeviceNDArray(shape=(length,), strides=(np.dtype(dtype).itemsize,), dtype=dtype, stream=stream)
        found.append([fields(mine) == fields(numbas), length, str(mine.dtype), mine.gpu_data.size])
    return found


def _reuse(calls: list) -> dict:
    """An allocation through zgrad's allocation cache, dropped and made again: the driver calls in
    between and after emptying the cache, whether the memory is the same, and the Numba type of
    the cached array (after ``_device_vectors`` has pointed the runtime at the stand-in context)."""
    import numpy as np
    from numba.cuda.cudadrv import devicearray
    from numba.cuda.typing.typeof import Purpose, typeof

    from zgrad.kernels.cuda import allocation_cache
    from zgrad.kernels.cuda.array import DeviceArray

    start, ignored = len(calls), []
    sys.unraisablehook = ignored.append  # errors in __del__
    first = DeviceArray.empty((6,), np.dtype(np.float32))
    pointer, base = first.data_ptr(), first.flat_arg()
    is_numbas = isinstance(base, devicearray.DeviceNDArray)
    numba_type = str(typeof(base, Purpose.argument))
    del first, base
    gc.collect()
    second = DeviceArray.empty((6,), np.dtype(np.float32))
    same = second.data_ptr() == pointer
    kept = [call[0] for call in calls[start:]]
    base = second.flat_arg()  # a slice as Numba's __getitem__ makes it, with type(self): not the allocation
    numbas_slice = type(base)((3,), (4,), base.dtype, stream=base.stream, gpu_data=base.gpu_data.view(0, 12))
    del numbas_slice, base
    del second
    allocation_cache.empty_cache()
    gc.collect()
    after_empty = [call[0] for call in calls[start:]]

    class Holder:
        pass

    start = len(calls)
    cyclic = Holder()
    cyclic.me, cyclic.array = cyclic, DeviceArray.empty((6,), np.dtype(np.float32))
    del cyclic
    gc.collect()  # the memory's finalizer frees it before the allocation's __del__ runs
    again = DeviceArray.empty((6,), np.dtype(np.float32))
    alive = again._base.gpu_data._finalizer.alive
    del again
    allocation_cache.empty_cache()
    gc.collect()
    sys.unraisablehook = sys.__unraisablehook__
    return {"same_pointer": same, "numba_device_array": is_numbas, "numba_type": numba_type, "calls": kept,
            "after_empty": after_empty, "cycle_calls": [call[0] for call in calls[start:]],
            "cycle_memory_alive": alive, "ignored_in_del": [repr(u.exc_value) for u in ignored]}


if __name__ == "__main__":
    sys.exit(main())
