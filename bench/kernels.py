"""Kernel benchmark: zgrad's fused Numba CPU kernels against the numpy code they replace.

Each row times one operation both ways in the same run (warm-up, then the median of repeats
with ``time.perf_counter``) and reports numpy_time / zgrad_time against a target:

- a fused kernel should be >= 3x the numpy expression doing the same math (one pass over memory
  where numpy makes one pass and one temporary per operator);
- a single-ufunc op (exp, log, tanh, relu) should at least match numpy;
- matmul (numpy ``matmul`` into ``out``, as the CPU backend calls it, vs ``a @ b``) >= 0.95x.

"zgrad ms" is the kernel writing into a preallocated ``out``; the numpy expression allocates its
result and temporaries, as written. Ops that produce a new array also get "incl. alloc": the
ratio when zgrad allocates ``out`` too (``np.empty_like`` per call, as the backend does today).
Fresh pages cost a first-touch fault each, so at 16M elements that column shows what a caching
allocator in the dispatch layer would win back.

Other processes on the machine distort the numbers: a parallel kernel waits for its slowest
thread, and a thread that loses its core to another process costs a scheduler time slice (ms).
The load average before and after the run is printed and stored with the results, and a row whose
median is far above its fastest call is marked "disturbed".

Usage: python bench/kernels.py [--quick] [--out bench/results/kernels.json]
       python bench/kernels.py --section layers --threads 1
       python bench/kernels.py --section layers --threads 2 --blas-threads 1   # OpenBLAS on one thread
       python bench/kernels.py --thresholds   # serial vs parallel variant by size (min of repeats)
       python bench/kernels.py --cuda         # only the CUDA section (bench/kernels_cuda.py)

The CUDA section (``bench/kernels_cuda.py``) runs last, in its own interpreter without Numba's
simulator: on a GPU it reports achieved GB/s and GFLOP/s against the device's peak (and torch's
time where torch has CUDA); without one it prints "no GPU".

Other sections (the MLP step) add a function to ``BENCHMARKS``: it takes a :class:`Settings` and
returns a list of :class:`Row`. Sections against torch that must run with one thread and with all
threads (layers: Conv2d, BatchNorm2d; sequence: LSTM, Embedding; optim: every optimizer's step
against torch's single-tensor, foreach and fused steps; math: every element-wise math function;
reduce: the reductions, sorts and scans) go into ``THREADED_SECTIONS`` instead: a function that
builds the section's :class:`Case` list with either library. For each thread count, zgrad and
torch each run in their own interpreter (``--section NAME --threads N`` runs one section), and
the two alternate rounds of calls with the waiting one stopped (SIGSTOP): in one process, torch's
OpenMP threads spin after each torch call and take the core zgrad's second thread needs.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import importlib
import json
import os
import pathlib
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))

import _procs  # noqa: E402

from zgrad.kernels import _jit  # noqa: E402
from zgrad.kernels.blas import SPIN_TIMEOUT  # noqa: E402
from zgrad.kernels.cpu import kernels  # noqa: E402

FUSED_TARGET = 3.0
SINGLE_OP_TARGET = 1.0
MATMUL_TARGET = 0.95
DTYPE = np.float32
NUM_CLASSES = 1024  # row length of the row-wise benchmarks


@dataclasses.dataclass(frozen=True)
class Settings:
    sizes: tuple[int, ...]
    matmul_sizes: tuple[int, ...]
    repeats: int  # at least this many timed calls ...
    min_sampling_s: float  # ... and more until this much time is spent, so fast ops get many samples
    warmup: int


FULL = Settings(sizes=(1 << 20, 1 << 22, 1 << 24), matmul_sizes=(1024, 2048), repeats=9, min_sampling_s=0.1, warmup=2)
QUICK = Settings(sizes=(1 << 20,), matmul_sizes=(1024,), repeats=5, min_sampling_s=0.05, warmup=1)


@dataclasses.dataclass(frozen=True)
class Row:
    name: str
    size: str
    zgrad_s: float
    numpy_s: float
    target: float
    zgrad_best_s: float  # fastest zgrad call: far below the median when other processes interfered
    zgrad_alloc_s: float | None = None  # zgrad time when it also allocates ``out``
    note: str = ""

    @property
    def ratio(self) -> float:
        return self.numpy_s / self.zgrad_s

    @property
    def ratio_with_alloc(self) -> float | None:
        return None if self.zgrad_alloc_s is None else self.numpy_s / self.zgrad_alloc_s

    @property
    def passed(self) -> bool:
        return self.ratio >= self.target


def sample_times_s(fn: Callable[[], object], settings: Settings) -> list[float]:
    """Wall times of timed calls of ``fn`` after ``settings.warmup`` untimed ones.

    At least ``settings.repeats`` calls, and more until ``settings.min_sampling_s`` is spent: a
    median over many samples is not moved by the occasional call that waited for a busy core.
    """
    for _ in range(settings.warmup):
        fn()
    times: list[float] = []
    while len(times) < settings.repeats or sum(times) < settings.min_sampling_s:
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return times


def median_s(fn: Callable[[], object], settings: Settings) -> float:
    return statistics.median(sample_times_s(fn, settings))


def compare(name: str, size: str, zgrad_fn, numpy_fn, target: float, settings: Settings,
            zgrad_alloc_fn=None, note: str = "") -> Row:
    zgrad_times = sample_times_s(zgrad_fn, settings)
    return Row(name, size, statistics.median(zgrad_times), median_s(numpy_fn, settings), target, min(zgrad_times),
               None if zgrad_alloc_fn is None else median_s(zgrad_alloc_fn, settings), note)


def into_out(call: Callable[[np.ndarray], object], out_like: np.ndarray):
    """``call(out)`` two ways: into one preallocated ``out``, and into a fresh one per call."""
    out = np.empty_like(out_like)
    return (lambda: call(out)), (lambda: call(np.empty_like(out_like)))


def _size_label(n: int) -> str:
    return f"{n >> 20}M" if n >= 1 << 20 else f"{n >> 10}K"


# --- element-wise -----------------------------------------------------------------------------

def bench_elementwise(settings: Settings) -> list[Row]:
    rows = []
    rng = np.random.default_rng(0)
    for n in settings.sizes:
        label = _size_label(n)
        x = rng.standard_normal(n, dtype=DTYPE)
        g = rng.standard_normal(n, dtype=DTYPE)
        y = rng.random(n, dtype=DTYPE)
        positive = y + DTYPE(0.5)
        upstream = np.array([0.25], DTYPE)  # one broadcast gradient: out = 2 * 0.25 * (x - y)

        def mse(out):
            kernels.loss.pointwise_loss_sum(x, y, True)
            kernels.loss.pointwise_loss_backward(x, y, upstream, True, out)

        def mse_numpy():
            np.sum((x - y) ** 2, dtype=np.float64)
            DTYPE(0.5) * (x - y)

        cases = [
            ("sigmoid_backward  g*y*(1-y)", lambda out: kernels.elementwise.sigmoid_backward(g, y, out),
             lambda: g * y * (1 - y), FUSED_TARGET),
            ("tanh_backward  g*(1-y*y)", lambda out: kernels.elementwise.tanh_backward(g, y, out),
             lambda: g * (1 - y * y), FUSED_TARGET),
            ("relu_backward  g*(x>0)", lambda out: kernels.elementwise.relu_backward(g, x, out),
             lambda: g * (x > 0), FUSED_TARGET),
            ("sigmoid_forward  1/(1+exp(-x))", lambda out: kernels.elementwise.sigmoid_forward(x, out),
             lambda: 1 / (1 + np.exp(-x)), FUSED_TARGET),
            ("mse fwd+bwd  sum((a-b)**2), s*(a-b)", mse, mse_numpy, FUSED_TARGET),
            ("exp", lambda out: kernels.elementwise.exp_forward(x, out), lambda: np.exp(x), SINGLE_OP_TARGET),
            ("log", lambda out: kernels.elementwise.log_forward(positive, out), lambda: np.log(positive), SINGLE_OP_TARGET),
            ("tanh", lambda out: kernels.elementwise.tanh_forward(x, out), lambda: np.tanh(x), SINGLE_OP_TARGET),
            ("relu  max(x,0)", lambda out: kernels.elementwise.relu_forward(x, out), lambda: np.maximum(x, 0), SINGLE_OP_TARGET),
        ]
        for name, zgrad_call, numpy_fn, target in cases:
            preallocated, allocating = into_out(zgrad_call, x)
            rows.append(compare(name, label, preallocated, numpy_fn, target, settings, allocating))
    return rows


# --- row-wise ---------------------------------------------------------------------------------

def bench_rowwise(settings: Settings) -> list[Row]:
    rows = []
    rng = np.random.default_rng(1)
    for n in settings.sizes:
        label = f"{_size_label(n)} ({n // NUM_CLASSES}x{NUM_CLASSES})"
        x = rng.standard_normal((n // NUM_CLASSES, NUM_CLASSES), dtype=DTYPE)
        bias = rng.standard_normal(NUM_CLASSES, dtype=DTYPE)
        targets = rng.integers(0, NUM_CLASSES, x.shape[0])
        picked = (np.arange(x.shape[0]), targets)
        scale = 1.0 / x.shape[0]

        def softmax_cross_entropy(probs):
            kernels.rowwise.cross_entropy_forward(x, targets, -100, probs)
            kernels.rowwise.cross_entropy_backward(probs, targets, -100, scale, probs)

        def softmax_cross_entropy_numpy():
            shifted = x - x.max(axis=1, keepdims=True)
            exp = np.exp(shifted)
            total = exp.sum(axis=1, keepdims=True)
            np.mean(np.log(total)[:, 0] - shifted[picked], dtype=np.float64)
            grad = exp / total
            grad[picked] -= 1
            grad *= DTYPE(scale)

        def log_softmax_numpy():
            shifted = x - x.max(axis=1, keepdims=True)
            shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))

        cases = [
            ("bias+relu  max(x+b,0)", lambda out: kernels.rowwise.bias_act_forward(x, bias, 1, out),
             lambda: np.maximum(x + bias, 0), FUSED_TARGET),
            ("bias+tanh  tanh(x+b)", lambda out: kernels.rowwise.bias_act_forward(x, bias, 2, out),
             lambda: np.tanh(x + bias), FUSED_TARGET),
            ("softmax+cross_entropy fwd+bwd", softmax_cross_entropy, softmax_cross_entropy_numpy, FUSED_TARGET),
            ("log_softmax", lambda out: kernels.rowwise.log_softmax_forward(x, out), log_softmax_numpy, FUSED_TARGET),
        ]
        for name, zgrad_call, numpy_fn, target in cases:
            preallocated, allocating = into_out(zgrad_call, x)
            rows.append(compare(name, label, preallocated, numpy_fn, target, settings, allocating))
    return rows


# --- optimizers (in place: nothing to allocate) -----------------------------------------------

def bench_optim(settings: Settings) -> list[Row]:
    rows = []
    rng = np.random.default_rng(2)
    lr, momentum, beta1, beta2, eps, step = 1e-3, 0.9, 0.9, 0.999, 1e-8, 10
    for n in settings.sizes:
        label = _size_label(n)
        grad, param, buf, exp_avg = rng.standard_normal((4, n), dtype=DTYPE)
        exp_avg_sq = rng.random(n, dtype=DTYPE)
        no_max = np.empty(0, DTYPE)

        def sgd_numpy():
            # torch/optim/sgd.py single-tensor path as in-place numpy ops (dampening 0, no decay).
            np.multiply(buf, DTYPE(momentum), out=buf)
            np.add(buf, grad, out=buf)
            np.subtract(param, DTYPE(lr) * buf, out=param)

        def adam_numpy():
            # torch/optim/adam.py single-tensor path as in-place numpy ops (no decay, no amsgrad).
            np.add(exp_avg, (grad - exp_avg) * DTYPE(1 - beta1), out=exp_avg)
            np.multiply(exp_avg_sq, DTYPE(beta2), out=exp_avg_sq)
            np.add(exp_avg_sq, DTYPE(1 - beta2) * grad * grad, out=exp_avg_sq)
            step_size = lr / (1 - beta1**step)
            denom = np.sqrt(exp_avg_sq) / DTYPE((1 - beta2**step) ** 0.5) + DTYPE(eps)
            np.subtract(param, DTYPE(step_size) * exp_avg / denom, out=param)

        rows += [
            compare("sgd momentum step", label,
                    lambda: kernels.optim.sgd_step(param, grad, buf, lr, momentum, 0.0, 0.0, False, False, False), sgd_numpy,
                    FUSED_TARGET, settings),
            compare("adam step", label,
                    lambda: kernels.optim.adam_step(param, grad, exp_avg, exp_avg_sq, no_max, step, lr, beta1, beta2, eps, 0.0,
                                        False, False, False),
                    adam_numpy, FUSED_TARGET, settings),
        ]
    return rows


# --- matmul -----------------------------------------------------------------------------------

def bench_matmul(settings: Settings) -> list[Row]:
    rows = []
    rng = np.random.default_rng(3)
    for n in settings.matmul_sizes:
        a, b = rng.standard_normal((2, n, n), dtype=DTYPE)
        out = np.empty((n, n), DTYPE)
        row = compare("matmul", f"{n}x{n}", lambda: np.matmul(a, b, out=out), lambda: a @ b, MATMUL_TARGET, settings)
        gflop = 2 * n**3 / 1e9
        rows.append(dataclasses.replace(row, note=f"{gflop / row.zgrad_s:.0f} vs {gflop / row.numpy_s:.0f} GFLOP/s"))
    return rows


MLP_TARGET = 1 / 1.2  # a zgrad training step at most 1.2x PyTorch's time


def _mlp_step_zgrad(sizes: tuple[int, ...], batch: int):
    import zgrad
    import zgrad.nn.functional as F
    from zgrad import nn

    zgrad.manual_seed(0)
    layers: list = []
    for i, (a, b) in enumerate(zip(sizes, sizes[1:])):
        layers += [nn.Linear(a, b)] + ([nn.ReLU()] if i < len(sizes) - 2 else [])
    model = nn.Sequential(*layers)
    opt = zgrad.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    rng = np.random.default_rng(0)
    x = zgrad.from_numpy(rng.standard_normal((batch, sizes[0]), dtype=np.float32))
    y = zgrad.from_numpy(rng.integers(0, sizes[-1], size=batch))

    def step() -> None:
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()

    return step, model


def _mlp_step_torch(sizes: tuple[int, ...], batch: int, model_zgrad):
    import torch

    torch.set_num_threads(max(1, os.cpu_count() or 1))
    layers: list = []
    for i, (a, b) in enumerate(zip(sizes, sizes[1:])):
        layers += [torch.nn.Linear(a, b)] + ([torch.nn.ReLU()] if i < len(sizes) - 2 else [])
    model = torch.nn.Sequential(*layers)
    with torch.no_grad():  # same initial weights as the zgrad model
        for p, q in zip(model.parameters(), model_zgrad.parameters()):
            p.copy_(torch.from_numpy(q.numpy()))
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    rng = np.random.default_rng(0)
    x = torch.from_numpy(rng.standard_normal((batch, sizes[0]), dtype=np.float32))
    y = torch.from_numpy(rng.integers(0, sizes[-1], size=batch))

    def step() -> None:
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()

    return step


def bench_mlp_step(settings: Settings) -> list[Row]:
    """One training step (forward, cross-entropy, backward, SGD with momentum) vs PyTorch."""
    try:
        import torch  # noqa: F401
    except ImportError:
        print("torch is not installed: skipping the MLP step rows (pip install torch==2.13.0)")
        return []
    rows = []
    configs = [((784, 512, 512, 10), 64), ((1024, 1024, 1024, 10), 128)]
    if settings is QUICK:
        configs = configs[:1]
    for sizes, batch in configs:
        zgrad_step, model = _mlp_step_zgrad(sizes, batch)
        torch_step = _mlp_step_torch(sizes, batch, model)
        label = f"{'-'.join(map(str, sizes))} b{batch}"
        rows.append(compare("MLP train step (vs torch)", label, zgrad_step, torch_step, MLP_TARGET, settings,
                            note="numpy ms column = torch ms"))
    return rows


# --- sections against torch, one thread and all threads -------------------------------------

LAYER_TARGET = 1 / 1.5  # a zgrad layer's forward+backward at most 1.5x torch's time
LIBRARIES = ("zgrad", "torch")
SERVED_CALL_TIMEOUT_S = 900.0  # a case's first call compiles its kernels


@dataclasses.dataclass(frozen=True)
class Case:
    """One timed call of a threaded section, built by each library: its row's ``name`` and
    ``size``, and ``variant`` for an implementation besides the library's default (torch's foreach
    and fused optimizer steps), reported in the row's note."""
    name: str
    size: str
    fn: Callable[[], object]
    target: float
    variant: str = ""

    @property
    def key(self) -> str:
        return f"{self.name}|{self.size}|{self.variant}"


# A threaded section takes a library (the zgrad or torch module), the settings and the thread
# count, and returns its cases, the same for both libraries. Each library runs in its own
# interpreter per thread count (numpy's OpenBLAS and Numba read their thread counts once, when
# they load), and the two alternate rounds of calls with the idle one stopped
# (:func:`run_threaded_section`).
THREADED_SECTIONS: dict[str, Callable[[object, Settings, int], list[Case]]] = {}


def alternating_times(first: Callable[[], object], second: Callable[[], object], settings: Settings,
                      per_round: int = 3) -> tuple[list[float], list[float]]:
    """Wall times of two callables in one process, sampled in alternating rounds of ``per_round``
    timed calls.

    Each round starts with one untimed call: threads the other library leaves spinning after its
    last parallel region (OpenMP's, OpenBLAS's) slow that call down instead of a timed one.
    """
    for fn in (first, second):
        for _ in range(settings.warmup):
            fn()
    times: tuple[list[float], list[float]] = ([], [])
    while len(times[0]) < settings.repeats or sum(times[0]) + sum(times[1]) < 2 * settings.min_sampling_s:
        for fn, samples in zip((first, second), times):
            fn()
            for _ in range(per_round):
                start = time.perf_counter()
                fn()
                samples.append(time.perf_counter() - start)
    return times


def _thread_label(size: str, threads: int) -> str:
    return f"{size}, {threads} thread{'s' if threads > 1 else ''}"


def _same_parameters(lib, module, seed: int) -> None:
    """Every parameter of ``module`` drawn uniformly from (-0.05, 0.05) with ``seed``: the same
    values in either library, each in its own process."""
    rng = np.random.default_rng(seed)
    with lib.no_grad():
        for p in module.parameters():
            p.copy_(lib.tensor(rng.uniform(-0.05, 0.05, tuple(p.shape)).astype(DTYPE)))


def _training_step(module, x, upstream) -> Callable[[], None]:
    """forward + backward of ``module`` on ``x`` (zgrad or torch alike), gradients cleared first."""
    def step() -> None:
        x.grad = None
        module.zero_grad()
        module(x).backward(upstream)

    return step


def layers_section(lib, settings: Settings, threads: int) -> list[Case]:
    """Conv2d 3x3 64->64 and BatchNorm2d(64) forward+backward on 32x64x32x32 float32 vs torch."""
    rng = np.random.default_rng(5)
    x, upstream = rng.standard_normal((2, 32, 64, 32, 32), dtype=DTYPE)
    label = _thread_label("32x64x32x32", threads)
    cases = []
    for seed, (name, module) in enumerate([("Conv2d 3x3 64->64 pad 1 fwd+bwd", lib.nn.Conv2d(64, 64, 3, padding=1)),
                                           ("BatchNorm2d(64) train fwd+bwd", lib.nn.BatchNorm2d(64))]):
        _same_parameters(lib, module, seed)
        step = _training_step(module, lib.tensor(x, requires_grad=True), lib.tensor(upstream))
        cases.append(Case(name, label, step, LAYER_TARGET))
    return cases


THREADED_SECTIONS["layers"] = layers_section


def sequence_section(lib, settings: Settings, threads: int) -> list[Case]:
    """A 2-layer LSTM (256 hidden) on 35x20 tokens of 256 features, and the scatter-add backward of
    a 50000x256 Embedding on 35x20 tokens, forward+backward float32 vs torch."""
    rng = np.random.default_rng(6)
    steps, batch, features, rows = 35, 20, 256, 50_000
    x = lib.tensor(rng.standard_normal((steps, batch, features), dtype=DTYPE), requires_grad=True)
    upstream_lstm = lib.tensor(rng.standard_normal((steps, batch, features), dtype=DTYPE))
    tokens = lib.tensor(rng.integers(0, rows, size=(steps, batch)))
    upstream_embedding = lib.tensor(rng.standard_normal((steps, batch, features), dtype=DTYPE))
    lstm, embedding = lib.nn.LSTM(features, features, num_layers=2), lib.nn.Embedding(rows, features)
    _same_parameters(lib, lstm, 0)
    _same_parameters(lib, embedding, 1)

    def lstm_step() -> None:
        x.grad = None
        lstm.zero_grad()
        output, _ = lstm(x)
        output.backward(upstream_lstm)

    def embedding_step() -> None:
        embedding.zero_grad()  # set_to_none: every backward builds a fresh 50000x256 gradient
        embedding(tokens).backward(upstream_embedding)

    return [Case("LSTM 2x256 fwd+bwd", _thread_label("35x20x256", threads), lstm_step, LAYER_TARGET),
            Case("Embedding 50000x256 fwd+bwd", _thread_label("35x20 tokens", threads), embedding_step, LAYER_TARGET)]


THREADED_SECTIONS["sequence"] = sequence_section


OPTIM_TARGET = 1.0  # a zgrad optimizer step at most torch's time
# (optimizer, options): every optimizer of zgrad.optim with its common options.
OPTIM_CASES = [("SGD", dict(lr=1e-3, momentum=0.9)), ("Adam", dict(lr=1e-3)), ("AdamW", dict(lr=1e-3)),
               ("RMSprop", dict(lr=1e-3)), ("Adagrad", dict(lr=1e-3)), ("Adadelta", dict(lr=1e-3))]
# torch's implementations besides its CPU default (the single-tensor loop), where it has them.
TORCH_IMPLEMENTATIONS = {"SGD": ("foreach", "fused"), "Adam": ("foreach", "fused"), "AdamW": ("foreach", "fused"),
                         "RMSprop": ("foreach",), "Adagrad": ("foreach", "fused"), "Adadelta": ("foreach",)}


def _optimizer_step(lib, name: str, options: dict, param: np.ndarray, grad: np.ndarray) -> Callable[[], object]:
    """``optimizer.step`` of ``lib.optim.<name>`` (zgrad or torch) over one float32 parameter."""
    tensor = lib.tensor(param.copy(), requires_grad=True)
    tensor.grad = lib.tensor(grad)
    return getattr(lib.optim, name)([tensor], **options).step


def optim_section(lib, settings: Settings, threads: int) -> list[Case]:
    """One optimizer step (one fused kernel) of every optimizer on one float32 parameter vs
    torch's step on the same sizes: its default on the CPU (the single-tensor loop) in the
    ratio, its foreach and fused implementations in the note."""
    rng = np.random.default_rng(7)
    cases = []
    for n in settings.sizes:
        param, grad = rng.standard_normal((2, n), dtype=DTYPE)
        label = _thread_label(_size_label(n), threads)
        for name, options in OPTIM_CASES:
            row = f"{name} step (vs torch single-tensor)"
            if lib.__name__ == "torch":
                options = {**options, "foreach": False}
                cases += [Case(row, label, _optimizer_step(lib, name, {**options, implementation: True}, param, grad),
                               OPTIM_TARGET, variant=implementation) for implementation in TORCH_IMPLEMENTATIONS[name]]
            cases.append(Case(row, label, _optimizer_step(lib, name, options, param, grad), OPTIM_TARGET))
    return cases


THREADED_SECTIONS["optim"] = optim_section


# Element-wise math functions, forward on float32 (bitwise ones on int32): zgrad's public op
# (dispatch, allocation and kernel) against torch's, each at least torch's throughput. Inputs:
# "x" in (0.1, 0.9) and "y" = 1 + x, inside every function's domain; "i", "j" int32; "g" standard
# normal with requires_grad and "u" its upstream gradient, for GELU's forward + backward.
MATH_TARGET = 1.0


def _gelu_step(approximate: str) -> Callable[..., object]:
    """GELU forward + backward on t["g"] (gradient cleared first), zgrad or torch alike."""
    def step(lib, t) -> None:
        t["g"].grad = None
        lib.nn.functional.gelu(t["g"], approximate=approximate).backward(t["u"])

    return step


MATH_CASES: dict[str, Callable[..., object]] = {
    **{name: (lambda name: lambda lib, t: getattr(lib, name)(t["x"]))(name) for name in (
        "sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "asinh", "atanh", "erf", "erfc", "erfinv",
        "log1p", "expm1", "log2", "log10", "exp2", "rsqrt", "reciprocal", "floor", "ceil", "round", "trunc", "frac",
        "sign", "nan_to_num", "isnan", "isinf", "isfinite", "signbit")},
    "acosh": lambda lib, t: lib.acosh(t["y"]),
    **{name: (lambda name: lambda lib, t: getattr(lib, name)(t["x"], t["y"]))(name) for name in (
        "atan2", "fmod", "hypot", "logaddexp", "logaddexp2", "copysign")},
    "lerp": lambda lib, t: lib.lerp(t["x"], t["y"], 0.3),
    "clamp_min": lambda lib, t: lib.clamp_min(t["x"], 0.5),
    **{name: (lambda name: lambda lib, t: getattr(lib, name)(t["i"], t["j"]))(name) for name in (
        "bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_left_shift", "bitwise_right_shift")},
    "bitwise_not": lambda lib, t: lib.bitwise_not(t["i"]),
    "gelu": lambda lib, t: lib.nn.functional.gelu(t["x"]),
    "gelu fwd+bwd": _gelu_step("none"),
    "gelu tanh fwd+bwd": _gelu_step("tanh"),
}


def math_section(lib, settings: Settings, threads: int) -> list[Case]:
    """Every element-wise math function of MATH_CASES (forward) vs torch, per size."""
    rng = np.random.default_rng(11)
    cases = []
    for n in settings.sizes:
        x = rng.uniform(0.1, 0.9, n).astype(DTYPE)
        arrays = {"x": x, "y": x + DTYPE(1), "i": rng.integers(-1000, 1000, n, dtype=np.int32),
                  "j": rng.integers(0, 31, n, dtype=np.int32), "u": rng.standard_normal(n, dtype=DTYPE)}
        tensors = ({k: lib.tensor(v) for k, v in arrays.items()}
                   | {"g": lib.tensor(rng.standard_normal(n, dtype=DTYPE), requires_grad=True)})
        label = _thread_label(_size_label(n), threads)
        cases += [Case(name, label, functools.partial(fn, lib, tensors), MATH_TARGET) for name, fn in MATH_CASES.items()]
    return cases


THREADED_SECTIONS["math"] = math_section


# The reductions added with the conformance work, forward on float32 (bool for all/any): over a
# whole tensor and along the last dim of a (n / 1024, 1024) matrix, against torch's.
REDUCE_TARGET = 1.0
REDUCE_CASES: dict[str, Callable[..., object]] = {
    "sum (all)": lambda lib, t: lib.sum(t["x"]),
    "mean (rows)": lambda lib, t: lib.mean(t["m"], dim=-1),
    "amax (all)": lambda lib, t: lib.amax(t["x"]),
    "amax (rows)": lambda lib, t: lib.amax(t["m"], dim=-1),
    "aminmax (all)": lambda lib, t: lib.aminmax(t["x"]),
    "nanmean (rows)": lambda lib, t: lib.nanmean(t["m"], dim=-1),
    "var_mean (rows)": lambda lib, t: lib.var_mean(t["m"], dim=-1),
    "all (all)": lambda lib, t: lib.all(t["b"]),
    "any (rows)": lambda lib, t: lib.any(t["bm"], dim=-1),
    "count_nonzero (all)": lambda lib, t: lib.count_nonzero(t["x"]),
    "cumprod (rows)": lambda lib, t: lib.cumprod(t["m"], dim=-1),
    "cummax (rows)": lambda lib, t: lib.cummax(t["m"], dim=-1),
    "logcumsumexp (rows)": lambda lib, t: lib.logcumsumexp(t["m"], dim=-1),
    "median (rows)": lambda lib, t: lib.median(t["m"], dim=-1),
    "sort (rows)": lambda lib, t: lib.sort(t["m"], dim=-1),
    "topk 8 (rows)": lambda lib, t: lib.topk(t["m"], 8, dim=-1),
    "norm (all)": lambda lib, t: lib.linalg.vector_norm(t["x"]),
}


def reduce_section(lib, settings: Settings, threads: int) -> list[Case]:
    """Every reduction of REDUCE_CASES (forward) vs torch, per size."""
    rng = np.random.default_rng(13)
    cases = []
    for n in settings.sizes:
        x = rng.uniform(0.1, 0.9, n).astype(DTYPE)
        flags = rng.random(n) < 0.999
        arrays = {"x": x, "m": x.reshape(-1, 1024), "b": flags, "bm": flags.reshape(-1, 1024)}
        tensors = {k: lib.tensor(v) for k, v in arrays.items()}
        label = _thread_label(_size_label(n), threads)
        cases += [Case(name, label, functools.partial(fn, lib, tensors), REDUCE_TARGET)
                  for name, fn in REDUCE_CASES.items()]
    return cases


THREADED_SECTIONS["reduce"] = reduce_section


def thread_environment(threads: int, blas_threads: int | None = None) -> dict[str, str]:
    """A worker's environment (:func:`_procs.worker_env`) with every thread pool sized to
    ``threads`` (Numba and the BLAS libraries read them once, at import), numpy's OpenBLAS to
    ``blas_threads`` if given."""
    env = _procs.worker_env(threads)
    if blas_threads is not None:
        env["OPENBLAS_NUM_THREADS"] = str(blas_threads)
    return env


def run_with_bounded_spin() -> None:
    """Run this script again, at once, with OpenBLAS's spin bounded as zgrad bounds it in a
    program that imports zgrad before numpy (these scripts import numpy first), unless a spin is
    set already (a value set by hand is kept). Child interpreters inherit it."""
    if not any(name in os.environ for name in ("OPENBLAS_THREAD_TIMEOUT", "GOTO_THREAD_TIMEOUT")):
        os.execve(sys.executable, [sys.executable, *sys.argv],
                  {**os.environ, "OPENBLAS_THREAD_TIMEOUT": str(SPIN_TIMEOUT)})


def serve_section(library: str, spec: dict) -> None:
    """The worker of :func:`run_threaded_section`: build ``spec["section"]``'s cases with
    ``library``, answer ``{"describe": true}`` with them and time the calls asked for
    (:func:`_procs.serve_timed`)."""
    lib = importlib.import_module(library)
    if library == "torch":
        lib.set_num_threads(spec["threads"])
    settings = QUICK if spec["quick"] else FULL
    cases = THREADED_SECTIONS[spec["section"]](lib, settings, spec["threads"])
    described = [{"key": c.key, "name": c.name, "size": c.size, "variant": c.variant, "target": c.target}
                 for c in cases]
    _procs.serve_timed({c.key: c.fn for c in cases}, settings.warmup, {"cases": described})


def run_threaded_section(section: str, threads: int, settings: Settings, blas_threads: int | None = None) -> list[Row]:
    """The rows of ``section`` at ``threads`` threads: zgrad's and torch's cases, each library in
    its own interpreter, alternating rounds of calls while the other is stopped."""
    spec = {"section": section, "threads": threads, "quick": settings is QUICK}
    worlds: dict[str, _procs.ServedWorld] = {}
    try:
        for library in LIBRARIES:
            worlds[library] = _procs.ServedWorld(__file__, library, spec, 1,
                                                 env=thread_environment(threads, blas_threads))
        cases = {}
        for library, world in worlds.items():
            _procs.activate(worlds, library)
            cases[library] = {c["key"]: c for c in world.ask({"describe": True}, SERVED_CALL_TIMEOUT_S)["cases"]}

        def times(zgrad_key: str, torch_key: str) -> dict[str, list[float]]:
            return _procs.alternating_rounds(worlds, {"zgrad": {"call": zgrad_key}, "torch": {"call": torch_key}},
                                             settings.repeats, settings.min_sampling_s, 3, SERVED_CALL_TIMEOUT_S)

        rows = []
        for key, case in cases["zgrad"].items():
            variants = [c for c in cases["torch"].values()
                        if (c["name"], c["size"]) == (case["name"], case["size"]) and c["variant"]]
            speedups = []
            for variant in variants:
                sampled = times(key, variant["key"])
                speedups.append(f"{variant['variant']} "
                                f"{statistics.median(sampled['torch']) / statistics.median(sampled['zgrad']):.2f}x")
            sampled = times(key, key)
            note = "; ".join(filter(None, ["numpy ms column = torch ms",
                                           speedups and "speed-up vs torch " + ", ".join(speedups)]))
            rows.append(Row(case["name"], case["size"], statistics.median(sampled["zgrad"]),
                            statistics.median(sampled["torch"]), case["target"], min(sampled["zgrad"]), note=note))
        return rows
    finally:
        for world in worlds.values():
            world.close()


def bench_threaded_sections(settings: Settings) -> list[Row]:
    """Every threaded section with 1 thread and with all threads (:func:`run_threaded_section`)."""
    if not _procs.have_torch():
        print("torch is not installed: skipping the sections against torch (pip install torch==2.13.0)")
        return []
    return [row for threads in sorted({1, os.cpu_count() or 1}) for section in THREADED_SECTIONS
            for row in run_threaded_section(section, threads, settings)]


BENCHMARKS: list[Callable[[Settings], list[Row]]] = [bench_elementwise, bench_rowwise, bench_optim, bench_matmul,
                                                     bench_mlp_step, bench_threaded_sections]


# --- parallel thresholds ----------------------------------------------------------------------

def threshold_sweep() -> None:
    """Print serial and parallel times of representative kernels from 2**12 to 2**24 elements.

    Medians of alternating rounds: a parallel call that follows other work pays for waking the
    layer's sleeping threads, as in a program. The parallel variant runs as a kernel call runs it
    (``_jit._LAYER``, which starts Numba's layer with zgrad's wait policy); the thresholds in
    zgrad/kernels/_jit.py come from this table.
    """
    rng = np.random.default_rng(4)
    def data(*shape):
        return rng.random(shape, dtype=DTYPE)

    cases = {
        "relu_forward (cheap)": lambda n: (kernels.elementwise.relu_forward, (data(n), data(n))),
        "sigmoid_backward (cheap)": lambda n: (kernels.elementwise.sigmoid_backward, (data(n), data(n), data(n))),
        "adam (cheap)": lambda n: (kernels.optim._ADAM_UPDATES[False], (data(n), data(n), data(n), data(n), data(0),
                                                                     0.1, 0.999, 1e-3, 0.5, 1e-8, 0.0, 1.0, False,
                                                                     False)),
        "tanh_forward (heavy)": lambda n: (kernels.elementwise.tanh_forward, (data(n), data(n))),
        "softmax_forward (heavy)": lambda n: (kernels.rowwise.softmax_forward, (data(n // 1024, 1024), data(n // 1024, 1024))),
    }
    settings = Settings(sizes=(), matmul_sizes=(), repeats=25, min_sampling_s=0.0, warmup=2)
    print(f"current thresholds: cheap {_jit.PARALLEL_MIN_SIZE}, heavy {_jit.PARALLEL_MIN_SIZE_HEAVY}")
    print(f"{'kernel':<26}{'size':>8}{'serial us':>12}{'parallel us':>13}{'serial/parallel':>17}")
    for name, make in cases.items():
        for power in range(12, 25):
            kernel, args = make(1 << power)
            serial, parallel = map(statistics.median, alternating_times(
                functools.partial(kernel.serial, *args), functools.partial(_jit._LAYER.run, kernel.parallel, args),
                settings))
            print(f"{name:<26}{'2^' + str(power):>8}{serial * 1e6:>12.1f}{parallel * 1e6:>13.1f}"
                  f"{serial / parallel:>17.2f}")


# --- report -----------------------------------------------------------------------------------

def _note(row: Row) -> str:
    if row.zgrad_s > 1.5 * row.zgrad_best_s:
        return " ".join(filter(None, [row.note, f"disturbed: best {row.zgrad_best_s * 1e3:.3f} ms"]))
    return row.note


def blas_description() -> str:
    """numpy's BLAS as loaded: library, version, kernel architecture, threads, and the variables
    that force its kernel (some machines set OPENBLAS_CORETYPE; its kernel changes float32 GEMM
    speed up to twofold, see bench/README.md)."""
    from threadpoolctl import threadpool_info

    libraries = [info for info in threadpool_info() if info["user_api"] == "blas"]
    numpys = [info for info in libraries if "numpy" in info["filepath"]] or libraries
    found = ", ".join(f"{info['internal_api']} {info.get('version')} {info.get('architecture', '')}, "
                      f"{info['num_threads']} threads" for info in numpys) or "none found"
    forced = [f"{name}={os.environ[name]}" for name in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE") if name in os.environ]
    spin = next((f"{name}={os.environ[name]}" for name in ("OPENBLAS_THREAD_TIMEOUT", "GOTO_THREAD_TIMEOUT")
                 if name in os.environ), "OpenBLAS's default spin")
    return found + (f" ({', '.join(forced)} set)" if forced else "") + f"; {spin}"


def format_table(rows: list[Row]) -> str:
    header = ("name", "size", "zgrad ms", "numpy ms", "speed-up", "target", "pass", "incl. alloc", "note")
    lines = [
        (r.name, r.size, f"{r.zgrad_s * 1e3:.3f}", f"{r.numpy_s * 1e3:.3f}", f"{r.ratio:.2f}x",
         f">={r.target:g}x", "PASS" if r.passed else "fail",
         "" if r.ratio_with_alloc is None else f"{r.ratio_with_alloc:.2f}x", _note(r))
        for r in rows
    ]
    widths = [max(len(str(cell)) for cell in column) for column in zip(header, *lines)]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths)
    return "\n".join([fmt.format(*header), fmt.format(*("-" * w for w in widths)), *(fmt.format(*ln) for ln in lines)])


def cuda_section(quick: bool) -> dict:
    """``bench/kernels_cuda.py`` in its own interpreter, without Numba's simulator."""
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}
    script = pathlib.Path(__file__).resolve().parent / "kernels_cuda.py"
    done = subprocess.run([sys.executable, str(script), *(["--quick"] if quick else [])], env=env,
                          stdout=subprocess.PIPE, text=True, timeout=1800)
    if done.returncode != 0 or not done.stdout.strip():
        return {"status": f"failed (exit status {done.returncode}; its error output is above)"}
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="one size, fewer repeats")
    parser.add_argument("--thresholds", action="store_true", help="only sweep serial vs parallel variants")
    parser.add_argument("--section", choices=sorted(THREADED_SECTIONS),
                        help="only this section against torch; prints its rows as JSON (with --threads)")
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1,
                        help="with --section: the thread count (also set NUMBA_NUM_THREADS and "
                             "OPENBLAS_NUM_THREADS to it)")
    parser.add_argument("--blas-threads", type=int,
                        help="with --section: numpy's OpenBLAS threads, if not --threads (zgrad splits the "
                             "Winograd convolution's products between its own threads where OpenBLAS runs one)")
    parser.add_argument("--cuda", action="store_true", help="only the CUDA section")
    parser.add_argument("--worker", choices=LIBRARIES, help=argparse.SUPPRESS)  # a served library (serve_section)
    parser.add_argument("--rank", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--spec", help=argparse.SUPPRESS)
    parser.add_argument("--out", type=pathlib.Path,
                        default=pathlib.Path(__file__).resolve().parent / "results" / "kernels.json")
    args = parser.parse_args(argv)
    if argv is None:
        run_with_bounded_spin()
    if args.worker:
        serve_section(args.worker, json.loads(args.spec))
        return 0
    if args.thresholds:
        threshold_sweep()
        return 0
    settings = QUICK if args.quick else FULL
    if args.section:
        rows = run_threaded_section(args.section, args.threads, settings, args.blas_threads)
        if args.blas_threads is not None:
            rows = [dataclasses.replace(row, size=f"{row.size}, OpenBLAS {args.blas_threads}") for row in rows]
        print(format_table(rows), file=sys.stderr)
        print(json.dumps([dataclasses.asdict(r) for r in rows]))
        return 0

    load_before = os.getloadavg()[0]
    rows = [] if args.cuda else [row for benchmark in BENCHMARKS for row in benchmark(settings)]
    load_after = os.getloadavg()[0]
    if rows:
        print(format_table(rows))
    cuda = cuda_section(args.quick)
    print("\n" + (cuda["table"] if cuda["status"] == "ok" else f"CUDA: {cuda['status']}"))
    print(f"\nload average (1 min): {load_before:.2f} before, {load_after:.2f} after, on {os.cpu_count()} cpus")
    print(f"numpy's BLAS: {blas_description()}")

    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({
        "settings": dataclasses.asdict(settings),
        "machine": {"platform": platform.platform(), "cpus": os.cpu_count(), "numpy": np.__version__,
                    "blas": blas_description(), "numba_num_threads": os.environ.get("NUMBA_NUM_THREADS"),
                    "load_average_1min": {"before": load_before, "after": load_after}},
        "cuda": {k: v for k, v in cuda.items() if k != "table"},
        "rows": [{**dataclasses.asdict(r), "ratio": r.ratio, "ratio_with_alloc": r.ratio_with_alloc,
                  "passed": r.passed} for r in rows],
    }, indent=2))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
