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
adds zgrad's device time by kernel over one step (CUDA events around each launch and cuBLAS call).

Runs only on a real GPU; elsewhere it prints "no GPU" and exits 0.

    python bench/train_step.py --cuda [--quick] [--profile] [--out bench/results/train_step.json]
"""

from __future__ import annotations

import argparse
import itertools
import json
import pathlib
import statistics
import sys
import time
from collections.abc import Callable

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


def profile(step: Callable[[], None], top: int = 40) -> dict:
    """Device time by kernel in one zgrad step: CUDA events around every launch and every cuBLAS
    and cuBLASLt call (which serializes nothing on the device but adds host time), summed by kernel
    name."""
    from zgrad.kernels.cuda import cublas, cublas_lt
    from zgrad.kernels.cuda import runtime as rt
    records: list[tuple[str, object, object]] = []
    launch, gemm = rt.launch, cublas.gemm
    gemm_bias, gemm_row_sums = cublas_lt.gemm_bias, cublas_lt.gemm_row_sums

    def timed(name: str, fn: Callable[..., object], *args: object) -> object:
        start, end = rt.Event(), rt.Event()
        start.record()
        result = fn(*args)
        end.record()
        records.append((name, start, end))
        return result

    def timed_launch(kernel, config, *args):
        name = getattr(getattr(kernel, "py_func", None), "__name__", None) or getattr(kernel, "__name__", "kernel")
        return timed(f"{name} grid={config[0]}", launch, kernel, config, *args)

    def timed_gemm(a, b, out):
        return timed(f"cublas gemm {tuple(out.shape)} {out.dtype}", gemm, a, b, out)

    def timed_lt(name: str, fn: Callable[..., bool]) -> Callable[..., bool]:
        return lambda a, b, vector, out: timed(f"cublasLt {name} {tuple(out.shape)} {out.dtype}", fn, a, b, vector, out)

    rt.launch, cublas.gemm = timed_launch, timed_gemm
    cublas_lt.gemm_bias, cublas_lt.gemm_row_sums = timed_lt("bias", gemm_bias), timed_lt("bias-gradient", gemm_row_sums)
    try:
        rt.synchronize()
        step()
        rt.synchronize()
    finally:
        rt.launch, cublas.gemm = launch, gemm
        cublas_lt.gemm_bias, cublas_lt.gemm_row_sums = gemm_bias, gemm_row_sums
    by_name: dict[str, list[float]] = {}
    for name, start, end in records:
        by_name.setdefault(name, []).append(start.elapsed_ms(end))
    rows = sorted(((sum(t), len(t), name) for name, t in by_name.items()), reverse=True)
    return {"launches": len(records), "device_ms": sum(r[0] for r in rows),
            "top": [{"ms": round(ms, 4), "calls": calls, "kernel": name} for ms, calls, name in rows[:top]]}


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
            "profile": profile(steps["zgrad"][0]) if with_profile else None}


def format_table(rows: list[dict], device: str) -> str:
    header = ("step", "zgrad ms", "torch ms", "zgrad/torch", "target", "host waits/step", "host ms zgrad/torch")
    lines = [(r["step"], f"{r['zgrad_ms']:.2f}", f"{r['torch_ms']:.2f}", f"{r['ratio']:.2f}x", f"<= {r['target']}x",
              str(r["host_waits_per_step"]), f"{r['zgrad_host_ms']:.1f} / {r['torch_host_ms']:.1f}") for r in rows]
    widths = [max(len(c) for c in col) for col in zip(header, *lines)]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths)
    table = [f"device: {device}", fmt.format(*header), fmt.format(*("-" * w for w in widths)),
             *(fmt.format(*ln) for ln in lines)]
    for r in rows:
        if r.get("profile"):
            p = r["profile"]
            table.append(f"\n{r['step']}: zgrad's device time by kernel, one step ({p['launches']} launches, "
                         f"{p['device_ms']:.2f} ms in kernels)")
            table += [f"  {k['ms']:9.3f} ms  {k['calls']:5d}x  {k['kernel']}" for k in p["top"]]
    return "\n".join(table)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cuda", action="store_true", help="run on the GPU (the only mode; kept for symmetry "
                                                            "with bench/kernels.py --cuda)")
    parser.add_argument("--quick", action="store_true", help="fewer rounds")
    parser.add_argument("--step", choices=sorted(STEPS), action="append", help="one step (default: all)")
    parser.add_argument("--profile", action="store_true", help="also zgrad's device time by kernel in one step")
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
