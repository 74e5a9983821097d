"""Training steps on the GPU: zgrad against torch on the same device, in the same run.

Two steps, each forward + loss + backward + optimizer step, float32 (TF32 off in both):

- ``mlp``: a 3-layer MLP 1024 -> 4096 -> 4096 -> 1000 with ReLU, batch 2048, cross-entropy, Adam;
- ``mingpt``: pytorch/examples' minGPT (``tests/support/mingpt.py``) at 8 layers, 8 heads,
  512 wide, block 256, batch 32, a 65-character vocabulary: forward, backward,
  ``clip_grad_norm_``, AdamW.

Each library's step runs ``per_round`` times back to back, then the device is synchronized; the
time per step is the wall time of the round over ``per_round``. Rounds alternate between the two
libraries; the table gives medians and zgrad's median over torch's (target <= 1.3x). zgrad's row
also counts the host waits inside one step (:func:`zgrad.kernels.cuda.runtime.host_waits`): a step
that never asks for a value should have none. "host ms" is the time the host spends queueing one
step: near the step's time, the step is bound by launch costs, not by the device. ``--profile``
adds each library's device time by kernel per step, from CUDA's activity trace (CUPTI, through
torch.profiler): what the GPU itself spent in each kernel, next to torch's kernels for the same step.

Runs only on a real GPU; elsewhere it prints "no GPU" and exits 0.

    python bench/train_step.py --cuda [--quick] [--profile] [--out bench/results/train_step.json]
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import pathlib
import statistics
import sys
import time
from collections.abc import Callable, Iterator

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "tests" / "support"))

from kernels_cuda import gpu_status
from mingpt import GPTConfig, create_optimizer, gpt_classes

TARGET = 1.3
MLP_WIDTHS = (1024, 4096, 4096, 1000)
MLP_BATCH = 2048
MINGPT = GPTConfig(n_layer=8, n_head=8, n_embd=512, vocab_size=65, block_size=256)
MINGPT_BATCH = 32


def _mlp_step(lib, seed: int = 0) -> Callable[[], None]:
    lib.manual_seed(seed)
    nn = lib.nn
    layers = []
    for i, (a, b) in enumerate(itertools.pairwise(MLP_WIDTHS)):
        layers += [nn.Linear(a, b)] + ([nn.ReLU()] if i < len(MLP_WIDTHS) - 2 else [])
    model = nn.Sequential(*layers).to("cuda")
    optimizer = lib.optim.Adam(model.parameters(), lr=1e-4)
    rng = np.random.default_rng(seed)
    x = lib.tensor(rng.standard_normal((MLP_BATCH, MLP_WIDTHS[0]), dtype=np.float32), device="cuda")
    y = lib.tensor(rng.integers(0, MLP_WIDTHS[-1], MLP_BATCH), device="cuda")

    def step() -> None:
        optimizer.zero_grad(set_to_none=True)
        lib.nn.functional.cross_entropy(model(x), y).backward()
        optimizer.step()

    return step


def _mingpt_step(lib, seed: int = 0) -> Callable[[], None]:
    lib.manual_seed(seed)
    model = gpt_classes(lib).GPT(MINGPT, lib.float32).to("cuda")
    optimizer = create_optimizer(lib, model, learning_rate=3e-4)
    rng = np.random.default_rng(seed)
    tokens = rng.integers(0, MINGPT.vocab_size, size=(MINGPT_BATCH, MINGPT.block_size + 1))
    inputs, targets = lib.tensor(tokens[:, :-1], device="cuda"), lib.tensor(tokens[:, 1:], device="cuda")

    def step() -> None:
        optimizer.zero_grad(set_to_none=True)
        _, loss = model(inputs, targets)
        loss.backward()
        lib.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()

    return step


STEPS = {"mlp": _mlp_step, "mingpt": _mingpt_step}


def _round_ms(step: Callable[[], None], synchronize: Callable[[], None], per_round: int) -> float:
    synchronize()
    start = time.perf_counter()
    for _ in range(per_round):
        step()
    synchronize()
    return (time.perf_counter() - start) * 1e3 / per_round


def _host_waits_per_step(step: Callable[[], None]) -> int:
    from zgrad.kernels.cuda import runtime as rt
    before = rt.host_waits()
    step()
    return rt.host_waits() - before


def _host_ms(step: Callable[[], None], synchronize: Callable[[], None]) -> float:
    """Milliseconds the host spends queueing one step (the device idle at the start): a step whose
    host time is close to its wall time is bound by the host (launch costs), not the device."""
    synchronize()
    start = time.perf_counter()
    step()
    host = (time.perf_counter() - start) * 1e3
    synchronize()
    return host


def kernel_name(name: str) -> str:
    """A short readable name of a kernel as CUDA reports it: a Numba kernel's mangled name as its
    Python qualified name (``_ZN...14_unary_kernels12_3clocals_3e4flatB2v1...`` ->
    ``_unary_kernels.<locals>.flat``), a C++ kernel's without its return type and parameters."""
    if name.startswith("_ZN"):
        parts, at = [], 3
        while at < len(name) and name[at].isdigit():
            digits = at
            while name[at].isdigit():
                at += 1
            length = int(name[digits:at])
            parts.append(name[at:at + length])
            at += length
        if parts:
            qualified = [p.replace("_3c", "<").replace("_3e", ">") for p in parts]
            return ".".join(qualified[-3:])
    if name.startswith("void "):
        name = name[len("void "):].split("(")[0]
    return name[:120]


def device_profile(step: Callable[[], None], synchronize: Callable[[], None], label: Callable[[], object],
                   steps: int = 3, top: int = 30) -> dict:
    """Device time by kernel per step as the GPU ran it, from CUDA's activity trace (CUPTI, through
    torch.profiler): every kernel, memset and copy in the process, whichever library queued it, with
    no host time in it (CUDA events around a launch also count the host's issue time while the
    device waits for it). ``label()`` is entered around the steps (zgrad's launches named, see
    :func:`_named_launches`); kernels launched inside a name are also summed under it.

    Returns {"device_ms": per step, "kernels": per step, "top": [...], "by_name": [...]} or
    {"error": why} where the trace is not available (no CUPTI, no permission to profile)."""
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile
    synchronize()
    try:
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as trace, label():
            for _ in range(steps):
                step()
            synchronize()
        events = trace.events()
    except Exception as exc:  # noqa: BLE001 - the profile is an extra: the timings above stand without it
        return {"error": f"{type(exc).__name__}: {exc}"}
    kernels: dict[str, list[float]] = {}
    named: dict[str, list[float]] = {}
    for event in events:
        if event.device_type == DeviceType.CUDA:
            kernels.setdefault(kernel_name(event.name), []).append(event.time_range.elapsed_us() / 1e3)
        elif event.name.startswith(_LAUNCH_LABEL) and event.device_time_total:
            named.setdefault(event.name[len(_LAUNCH_LABEL):], []).append(event.device_time_total / 1e3)
    if not kernels:
        return {"error": "the trace holds no kernel: CUDA's activity trace is not available here"}

    def per_step(times: dict[str, list[float]]) -> list[dict]:
        rows = sorted(((sum(t), len(t), name) for name, t in times.items()), reverse=True)[:top]
        return [{"ms": round(ms / steps, 4), "calls": round(calls / steps, 1), "kernel": name} for ms, calls, name in rows]

    return {"device_ms": sum(map(sum, kernels.values())) / steps,
            "kernels": sum(map(len, kernels.values())) / steps, "top": per_step(kernels), "by_name": per_step(named)}


_LAUNCH_LABEL = "zgrad launch "


@contextlib.contextmanager
def _named_launches() -> Iterator[None]:
    """zgrad's kernel launches and cuBLAS calls each inside a torch.profiler range named after the
    kernel (``zgrad launch flat``; Numba's own names of zgrad's kernels do not tell the op apart)."""
    from torch.profiler import record_function

    from zgrad.kernels.cuda import cublas, cublas_lt
    from zgrad.kernels.cuda import runtime as rt
    launch, gemm = rt.launch, cublas.gemm
    gemm_bias, gemm_row_sums = cublas_lt.gemm_bias, cublas_lt.gemm_row_sums

    def named(name: str, fn: Callable[..., object], *args: object) -> object:
        with record_function(_LAUNCH_LABEL + name):
            return fn(*args)

    def named_launch(kernel, config, *args):
        py_func = getattr(kernel, "py_func", None)
        name = getattr(py_func, "__qualname__", None) or getattr(kernel, "__name__", "kernel")
        return named(f"{name} grid={config[0]}", launch, kernel, config, *args)

    def named_lt(name: str, fn: Callable[..., bool]) -> Callable[..., bool]:
        return lambda a, b, vector, out: named(f"cublasLt {name} {tuple(out.shape)} {out.dtype}", fn, a, b, vector, out)

    rt.launch = named_launch
    cublas.gemm = lambda a, b, out: named(f"cublas gemm {tuple(out.shape)} {out.dtype}", gemm, a, b, out)
    cublas_lt.gemm_bias, cublas_lt.gemm_row_sums = named_lt("bias", gemm_bias), named_lt("bias-gradient", gemm_row_sums)
    try:
        yield
    finally:
        rt.launch, cublas.gemm = launch, gemm
        cublas_lt.gemm_bias, cublas_lt.gemm_row_sums = gemm_bias, gemm_row_sums


def measure(name: str, quick: bool, with_profile: bool = False) -> dict:
    """zgrad's and torch's step times (alternating rounds, medians) for the step ``name``."""
    import torch

    import zgrad
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    steps = {"zgrad": (STEPS[name](zgrad), zgrad.cuda.synchronize), "torch": (STEPS[name](torch), torch.cuda.synchronize)}
    for step, synchronize in steps.values():  # compile, load, warm the allocators
        for _ in range(3):
            step()
        synchronize()
    waits = _host_waits_per_step(steps["zgrad"][0])
    host_ms = {library: _host_ms(step, synchronize) for library, (step, synchronize) in steps.items()}
    times: dict[str, list[float]] = {"zgrad": [], "torch": []}
    rounds, per_round = (3, 3) if quick else (7, 5)
    for _ in range(rounds):
        for library, (step, synchronize) in steps.items():
            times[library].append(_round_ms(step, synchronize, per_round))
    zgrad_ms, torch_ms = statistics.median(times["zgrad"]), statistics.median(times["torch"])
    return {"step": name, "zgrad_ms": zgrad_ms, "torch_ms": torch_ms, "ratio": zgrad_ms / torch_ms,
            "target": TARGET, "host_waits_per_step": waits, "zgrad_host_ms": host_ms["zgrad"],
            "torch_host_ms": host_ms["torch"], "zgrad_samples": times["zgrad"], "torch_samples": times["torch"],
            "profile": {"zgrad": device_profile(*steps["zgrad"], _named_launches),
                        "torch": device_profile(*steps["torch"], contextlib.nullcontext)} if with_profile else None}


def format_table(rows: list[dict], device: str) -> str:
    header = ("step", "zgrad ms", "torch ms", "zgrad/torch", "target", "host waits/step", "host ms zgrad/torch")
    lines = [(r["step"], f"{r['zgrad_ms']:.2f}", f"{r['torch_ms']:.2f}", f"{r['ratio']:.2f}x", f"<= {r['target']}x",
              str(r["host_waits_per_step"]), f"{r['zgrad_host_ms']:.1f} / {r['torch_host_ms']:.1f}") for r in rows]
    widths = [max(len(c) for c in col) for col in zip(header, *lines)]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths)
    table = [f"device: {device}", fmt.format(*header), fmt.format(*("-" * w for w in widths)),
             *(fmt.format(*ln) for ln in lines)]
    for r in rows:
        for library, p in (r.get("profile") or {}).items():
            if "error" in p:
                table.append(f"\n{r['step']}, {library}: no device profile ({p['error']})")
                continue
            table.append(f"\n{r['step']}, {library}: device time by kernel per step, as the GPU ran them "
                         f"({p['kernels']:.0f} kernels, {p['device_ms']:.2f} ms busy)")
            table += [f"  {k['ms']:9.3f} ms  {k['calls']:6.1f}x  {k['kernel']}" for k in p["top"]]
            if p["by_name"]:
                table.append(f"  {r['step']}, {library}: the same by the launch that queued them")
                table += [f"  {k['ms']:9.3f} ms  {k['calls']:6.1f}x  {k['kernel']}" for k in p["by_name"]]
    return "\n".join(table)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cuda", action="store_true", help="run on the GPU (the only mode; kept for symmetry "
                                                            "with bench/kernels.py --cuda)")
    parser.add_argument("--quick", action="store_true", help="fewer rounds")
    parser.add_argument("--step", choices=sorted(STEPS), action="append", help="one step (default: all)")
    parser.add_argument("--profile", action="store_true", help="also each library's device time by kernel (CUPTI)")
    parser.add_argument("--out", type=pathlib.Path, help="write the rows as JSON here")
    args = parser.parse_args(argv)
    status = gpu_status()
    if status is not None:
        print(status)
        return 0
    import zgrad
    rows = [measure(name, args.quick, args.profile) for name in (args.step or list(STEPS))]
    print(format_table(rows, zgrad.cuda.get_device_name()))
    if args.out:
        args.out.write_text(json.dumps({"rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
