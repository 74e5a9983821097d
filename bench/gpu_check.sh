#!/usr/bin/env bash
# The GPU checks of the CUDA backend in one short run, for a machine with a GPU that is lent for a
# few minutes: versions, the real-GPU test suite, then bench/kernels_cuda.py and
# bench/train_step.py against torch on the same device. Each stage has its own time limit, so one
# slow stage cannot eat the others' time. Logs and JSON go to the folder given (default
# bench/results/gpu).
#
#   bench/gpu_check.sh [OUT_DIR] [TEST_SECONDS] [BENCH_SECONDS]
set -uo pipefail
out=${1:-bench/results/gpu}
test_s=${2:-240}
bench_s=${3:-240}
mkdir -p "$out"
export PYTHONUNBUFFERED=1
cd "$(dirname "$0")/.."

# A machine whose Python lacks what zgrad needs (the lent H200's image has no pyzmq, and numpy
# 2.5, which numba-cuda 0.30 cannot import): wheels for its Python put in .whl/ (pyzmq, numpy<2.5)
# are installed into /tmp/site first.
if compgen -G ".whl/*.whl" > /dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    && export PYTHONPATH="/tmp/site:$PWD${PYTHONPATH:+:$PYTHONPATH}"
fi

echo "== versions"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader
python3 - <<'PY'
import importlib
for name in ("numpy", "numba", "numba_cuda", "llvmlite", "cuda.bindings", "cuda.pathfinder", "torch", "zmq", "zgrad"):
    try:
        module = importlib.import_module(name)
        print(f"{name} {getattr(module, '__version__', '?')}")
    except Exception as exc:  # noqa: BLE001
        print(f"{name}: {type(exc).__name__}: {exc}")
import zgrad
from zgrad.kernels.cuda import cublas
print("cuda available", zgrad.cuda.is_available(), "cublas", cublas.available(), cublas.library_path())
PY

echo "== benchmarks"
timeout "$bench_s" python3 bench/kernels_cuda.py > "$out/kernels_cuda.json" 2> "$out/kernels_cuda.err"
python3 -c "import json,sys; r=json.load(open(sys.argv[1])); print(r.get('table', r))" "$out/kernels_cuda.json" \
  || tail -20 "$out/kernels_cuda.err"
timeout "$bench_s" python3 bench/train_step.py --cuda --quick --profile --out "$out/train_step.json" \
  > "$out/train_step.txt" 2>&1
sed -n "/^device:/,/^$/p" "$out/train_step.txt" | grep . || tail -20 "$out/train_step.txt"  # the kernel tables: there
grep -E "busy|no device profile" "$out/train_step.txt"
echo "== the minGPT step through Numba's own launch path (against the direct launches above)"
ZGRAD_CUDA_NUMBA_LAUNCH=1 timeout "$bench_s" python3 bench/train_step.py --cuda --quick --step mingpt 2>&1 | tail -4

echo "== tests on the GPU"
ZGRAD_TEST_REAL_GPU=1 timeout "$test_s" python3 -m pytest -q -n 12 -p no:cacheprovider --timeout 200 \
  tests/kernels/test_cublas_cuda.py tests/kernels/test_cublas_lt_cuda.py tests/kernels/test_cuda_launcher.py tests/kernels/test_cuda_gpu.py tests/kernels/test_cuda_backend.py tests/kernels/test_cuda_host_waits.py \
  tests/kernels/test_cuda_memory_pool.py tests/kernels/test_multi_tensor_cuda.py tests/kernels/test_cuda_vector_access.py \
  tests/kernels/test_cuda_ops.py tests/kernels/test_reductions_cuda.py tests/kernels/test_half_dtypes_cuda.py \
  tests/nn/test_attention_cuda.py tests/nn/test_transformer_cuda.py > "$out/tests.log" 2>&1
echo "pytest exit $?"
grep -E "passed|failed|error" "$out/tests.log" | tail -3
grep -E "^(FAILED|ERROR)" "$out/tests.log" | head -40
