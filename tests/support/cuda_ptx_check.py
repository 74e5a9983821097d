"""Compile every CUDA kernel of zgrad for sm_90 and report float64 use in float32 kernels.

Run as a script (by tests/kernels/test_cuda_ptx.py) in a process without NUMBA_ENABLE_CUDASIM: it needs
Numba's real CUDA target and NVVM (numba-cuda[cu13]), but no GPU and no driver. Prints one JSON
object: {"compiled": n, "failures": [...], "f64": {name: count}, "uncovered": [kernels without a
PTX signature]}.

    python cuda_ptx_check.py [--shard I/N] [--float64 only|skip] [KERNEL ...]

``--shard I/N`` compiles every N-th variant from the I-th (0-based), so that N processes share the
work; ``--float64 only`` compiles just the float64 variants, ``--float64 skip`` every other one
(float32, integer); KERNEL names restrict it to those kernels.
"""

from __future__ import annotations

import json
import os
import re
import sys
import types

COMPUTE_CAPABILITY = (9, 0)
MODULES = ("attention", "elementwise", "rows", "layer_norm", "multi_tensor", "linalg", "optim", "index", "layers", "rnn", "scan", "sorting")  # of zgrad.kernels.cuda.kernels
# A float64 instruction: an f64 register, operation or conversion (.f64 / .rn.f64.f32 ...).
F64 = re.compile(r"\.f64\b")
# libdevice's sinf/cosf/tanf reduce huge arguments (Payne-Hanek, |x| > 105615) with one float64
# product by pi/2 * 2**-64: three float64 lines per inlined call (two conversions, the product)
# and the register declaration, that are CUDA's own float32 math, not a kernel computing in float64.
_TRIG_REDUCTION_CONSTANT = "0d3BF921FB54442D19"
_TRIG_REDUCTION_LINES_PER_CALL = 3


def _kernels(module: types.ModuleType) -> list[tuple[str, object]]:
    """(name, Python function) of every kernel (not device function) a kernel module defines,
    the element-wise tables' included."""
    from numba.cuda.dispatcher import CUDADispatcher

    found = []
    for label, value in vars(module).items():
        if isinstance(value, CUDADispatcher) and not value.targetoptions.get("device"):
            found.append((label, value.py_func))
        elif isinstance(value, dict) and label.isupper():
            for op, pair in value.items():
                if isinstance(pair, tuple):
                    found += [(f"{label}[{op}]", k.py_func) for k in pair if isinstance(k, CUDADispatcher)]
    return found


def main() -> int:
    if os.environ.get("NUMBA_ENABLE_CUDASIM"):
        print("cuda_ptx_check needs Numba's real CUDA target: unset NUMBA_ENABLE_CUDASIM", file=sys.stderr)
        return 2
    import importlib

    from numba import cuda
    import numba.cuda.dispatcher as dispatcher_module

    # Device functions read the current device's compute capability when they compile; there is
    # no device here, so report the target's.
    dispatcher_module.get_current_device = lambda: types.SimpleNamespace(compute_capability=COMPUTE_CAPABILITY)
    args = sys.argv[1:]
    shard, shards, float64 = 0, 1, None
    while args[:1] in (["--shard"], ["--float64"]):
        if args[0] == "--shard":
            shard, shards = (int(part) for part in args[1].split("/"))
        else:
            float64 = args[1] == "only"
        args = args[2:]
    only = set(args)
    compiled, failures, f64, uncovered = 0, [], {}, []
    index = -1
    for name in MODULES:
        module = importlib.import_module(f"zgrad.kernels.cuda.kernels.{name}")
        cases = module.ptx_signatures()
        covered = {id(py_func) for _, py_func, _ in cases}
        uncovered += [f"{name}.{label}" for label, py_func in _kernels(module) if id(py_func) not in covered]
        for case, py_func, signature in cases:
            if only and case.rsplit("_", 1)[0] not in only and case not in only:
                continue
            float32 = any("float32" in str(t) for t in signature)
            if float64 is not None and float64 != (not float32 and any("float64" in str(t) for t in signature)):
                continue
            index += 1
            if index % shards != shard:
                continue
            label = f"{name}.{case}[{'float32' if float32 else 'float64'}]"
            try:
                ptx, _ = cuda.compile_ptx(py_func, signature, cc=COMPUTE_CAPABILITY)
            except Exception as exc:  # noqa: BLE001 - every failure is reported
                failures.append(f"{label}: {type(exc).__name__}: {str(exc).splitlines()[0][:300]}")
                continue
            compiled += 1
            if float32:
                calls = ptx.count(_TRIG_REDUCTION_CONSTANT)
                count = len(F64.findall(ptx)) - (_TRIG_REDUCTION_LINES_PER_CALL * calls + min(1, calls))
                if count:
                    f64[label] = count
    print(json.dumps({"compiled": compiled, "failures": failures, "f64": f64, "uncovered": uncovered}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
