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
    result["calls"] = calls
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
