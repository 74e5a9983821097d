"""The CUDA section of ``bench/kernels.py``: zgrad's Numba CUDA kernels against the device's peak.

Each row times one kernel of the CUDA backend on preallocated device arrays with CUDA events on
the thread's stream (warm-up launches compile it first), and reports the achieved GB/s (bytes
every launch must read and write) or GFLOP/s beside the device's peak, estimated from the
driver's attributes (memory clock x bus width; FP32 lanes x SM clock; no tensor cores: zgrad's
matmul is a tiled shared-memory kernel in FP32). Where PyTorch with CUDA is installed, the same
operation through torch (cuBLAS, cuDNN with TF32 off, its fused Adam) is timed in the same run.

Runs only on a real GPU: without one (or in Numba's simulator) it prints "no GPU" and reports
nothing else.

    python bench/kernels.py --cuda           # this section only
    python bench/kernels_cuda.py [--quick]   # the same, as JSON on the last line
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import pathlib
import statistics
import sys
from collections.abc import Callable

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))

NO_GPU = "no GPU"


@dataclasses.dataclass(frozen=True)
class CudaRow:
    name: str
    size: str
    unit: str  # "GB/s" or "GFLOP/s"
    zgrad_ms: float
    zgrad_rate: float
    peak: float | None
    torch_ms: float | None = None

    @property
    def percent_of_peak(self) -> float | None:
        return None if not self.peak else 100.0 * self.zgrad_rate / self.peak

    @property
    def time_vs_torch(self) -> float | None:
        return None if self.torch_ms is None else self.zgrad_ms / self.torch_ms


def gpu_status() -> str | None:
    """None when a real GPU can be benchmarked, else why not."""
    try:
        import zgrad
        if not zgrad.cuda.is_available():
            return f"{NO_GPU} (CUDA backend unavailable here)"
        from zgrad.kernels.cuda import runtime as cuda_runtime
    except Exception as exc:  # noqa: BLE001 - any failure to load means: nothing to measure
        return f"{NO_GPU} ({type(exc).__name__}: {exc})"
    if cuda_runtime.SIMULATOR:
        return f"{NO_GPU} (Numba's CUDA simulator is not a GPU)"
    return None


def _events_ms(fn: Callable[[], object], repeat: int, samples: int = 5) -> float:
    """Median over ``samples`` of the event-timed mean of ``repeat`` back-to-back calls."""
    from zgrad.kernels.cuda import runtime as rt
    for _ in range(2):
        fn()
    rt.synchronize()
    return statistics.median(rt.elapsed_ms(fn, repeat) for _ in range(samples))


def _torch_ms(fn: Callable[[], object], repeat: int, samples: int = 5) -> float:
    import torch
    for _ in range(2):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(samples):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(repeat):
            fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / repeat)
    return statistics.median(times)


def _torch():
    try:
        import torch
    except ImportError:
        return None
    if not torch.cuda.is_available():
        return None
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    return torch


def cuda_rows(quick: bool) -> list[CudaRow]:
    """Time the CUDA kernels (a real GPU must be present: see :func:`gpu_status`)."""
    from zgrad.kernels.cuda import backend
    from zgrad.kernels.cuda.array import DeviceArray
    props = backend.device_properties()
    peak_gb_s, peak_gflop_s = props["peak_gb_s"], props["peak_gflop_s"]
    torch = _torch()
    n = 1 << (24 if quick else 26)
    f32 = np.float32
    rng = np.random.default_rng(0)

    def dev(*shape: int) -> DeviceArray:
        return DeviceArray.from_host(rng.standard_normal(shape).astype(f32))

    def tdev(*shape: int):
        return torch.randn(*shape, device="cuda", dtype=torch.float32)

    rows: list[CudaRow] = []

    def row(name: str, size: str, unit: str, amount: float, zgrad_fn, torch_fn=None, repeat: int = 20) -> None:
        ms = _events_ms(zgrad_fn, repeat)
        peak = peak_gb_s if unit == "GB/s" else peak_gflop_s
        torch_ms = None if torch_fn is None or torch is None else _torch_ms(torch_fn, repeat)
        rows.append(CudaRow(name, size, unit, ms, amount / (ms * 1e-3) / 1e9, peak, torch_ms))
        print(f"  {name} {size}: {ms:.3f} ms", file=sys.stderr)

    label = f"{n >> 20}M"
    a, b, out = dev(n), dev(n), DeviceArray.empty((n,), f32)
    ta, tb, tout = (tdev(n), tdev(n), torch.empty(n, device="cuda")) if torch else (None, None, None)
    row("copy", label, "GB/s", 2 * 4 * n, lambda: backend.copy(a, out), lambda: tout.copy_(ta))
    row("add", label, "GB/s", 3 * 4 * n, lambda: backend.add(a, b, out), lambda: torch.add(ta, tb, out=tout))
    row("exp", label, "GB/s", 2 * 4 * n, lambda: backend.exp(a, out), lambda: torch.exp(ta, out=tout))
    row("relu", label, "GB/s", 2 * 4 * n, lambda: backend.relu(a, out), lambda: torch.clamp_min(ta, 0, out=tout))
    heads = (n // (1 << 14), 256, 8, 8)  # (batch, sequence, heads, 8) taken heads-first, as attention's
    view, tview = a.reshape(*heads).transpose((0, 2, 1, 3)), (ta.view(*heads).permute(0, 2, 1, 3) if torch else None)
    moved, tmoved = out.reshape(heads[0], heads[2], heads[1], heads[3]), (tout.view(heads[0], heads[2], heads[1], heads[3])
                                                                          if torch else None)
    row("permuted copy (n-d)", label, "GB/s", 2 * 4 * n, lambda: backend.copy(view, moved), lambda: tmoved.copy_(tview))
    total = DeviceArray.empty((), f32)
    row("sum (all)", label, "GB/s", 4 * n, lambda: backend.sum(a, (0,), False, total), lambda: torch.sum(ta))
    whole, largest, where = a.reshape(1, n), DeviceArray.empty((1,), f32), DeviceArray.empty((), np.dtype(np.int64))
    row("max (all)", label, "GB/s", 4 * n, lambda: backend.extreme_rows(whole, True, largest), lambda: torch.amax(ta))
    row("argmax (all)", label, "GB/s", 4 * n, lambda: backend.argmax(a, None, False, where), lambda: torch.argmax(ta))

    rows_, cols = n // 1024, 1024
    x2, y2 = a.reshape(rows_, cols), out.reshape(rows_, cols)
    tx2 = ta.view(rows_, cols) if torch else None
    row("softmax rows", f"{rows_}x{cols}", "GB/s", 2 * 4 * n, lambda: backend.softmax(x2, y2),
        lambda: torch.softmax(tx2, -1))

    _row_kernel_rows(row, dev, tdev, torch, rows_, cols)

    params = n // 4
    p, g, m, v = dev(params), dev(params), DeviceArray.empty((params,), f32), DeviceArray.empty((params,), f32)
    backend.copy(g, m), backend.copy(g, v)
    backend.mul(v, v, v)
    step = [0]

    def zgrad_adam():
        step[0] += 1
        backend.adam_step(p, g, m, v, v, step[0], 1e-3, 0.9, 0.999, 1e-8, 0.0, False, False, False)

    torch_adam = None
    if torch:
        tp = torch.nn.Parameter(tdev(params))
        tp.grad = tdev(params)
        optimizer = torch.optim.Adam([tp], lr=1e-3, fused=True)
        torch_adam = optimizer.step
    row("adam step", f"{params >> 20}M params", "GB/s", 7 * 4 * params, zgrad_adam, torch_adam)

    size = 2048 if quick else 4096
    ma, mb, mc = dev(size, size), dev(size, size), DeviceArray.empty((size, size), f32)
    tma, tmb, tmc = (tdev(size, size), tdev(size, size), torch.empty(size, size, device="cuda")) if torch else (None,) * 3
    row("matmul fp32", f"{size}^3", "GFLOP/s", 2.0 * size ** 3, lambda: backend.matmul(ma, mb, mc),
        lambda: torch.matmul(tma, tmb, out=tmc), repeat=5)

    import zgrad
    from zgrad.kernels.promotion import BFLOAT16
    zgrad.set_float32_matmul_precision("high")
    if torch:
        torch.backends.cuda.matmul.allow_tf32 = True
    row("matmul tf32", f"{size}^3", "GFLOP/s", 2.0 * size ** 3, lambda: backend.matmul(ma, mb, mc),
        lambda: torch.matmul(tma, tmb, out=tmc), repeat=5)
    zgrad.set_float32_matmul_precision("highest")
    if torch:
        torch.backends.cuda.matmul.allow_tf32 = False
    half_a, half_b = (DeviceArray.from_host(rng.standard_normal((size, size)).astype(BFLOAT16)) for _ in range(2))
    half_c = DeviceArray.empty((size, size), BFLOAT16)
    tha, thb = (tma.bfloat16(), tmb.bfloat16()) if torch else (None, None)
    row("matmul bf16", f"{size}^3", "GFLOP/s", 2.0 * size ** 3, lambda: backend.matmul(half_a, half_b, half_c),
        lambda: torch.matmul(tha, thb), repeat=5)
    tokens, width, hidden = 2048, 1024, 4096  # the train-step benchmark's first layer: x @ W.T
    lx, lw, ly = dev(tokens, width), dev(hidden, width), DeviceArray.empty((tokens, hidden), f32)
    tlx, tlw = (tdev(tokens, width), tdev(hidden, width)) if torch else (None, None)
    row("linear fp32 (x @ W.T)", f"{tokens}x{width}->{hidden}", "GFLOP/s", 2.0 * tokens * width * hidden,
        lambda: backend.matmul(lx, lw.T, ly), lambda: torch.nn.functional.linear(tlx, tlw), repeat=10)

    batch, channels, hw, kernel = (16 if quick else 32), 64, 56, 3
    cx, cw = dev(batch, channels, hw, hw), dev(channels, channels, kernel, kernel)
    cout = DeviceArray.empty((batch, channels, hw, hw), f32)
    flops = 2.0 * batch * channels * hw * hw * channels * kernel * kernel
    tcx, tcw = (tdev(batch, channels, hw, hw), tdev(channels, channels, kernel, kernel)) if torch else (None, None)
    row("conv2d 3x3", f"{batch}x{channels}x{hw}x{hw}", "GFLOP/s", flops,
        lambda: backend.conv2d(cx, cw, None, (1, 1), (1, 1), (1, 1), 1, "zeros", cout),
        lambda: torch.nn.functional.conv2d(tcx, tcw, padding=1), repeat=5)

    grad_x, grad_w = DeviceArray.empty(cx.shape, f32), DeviceArray.empty(cw.shape, f32)

    def zgrad_conv_step():
        backend.conv2d(cx, cw, None, (1, 1), (1, 1), (1, 1), 1, "zeros", cout)
        backend.conv2d_backward(cout, cx, cw, (1, 1), (1, 1), (1, 1), 1, "zeros", grad_x, grad_w)

    torch_conv_step = None
    if torch:
        tcx_g, tcw_g = tcx.clone().requires_grad_(), tcw.clone().requires_grad_()

        def torch_conv_step():
            y = torch.nn.functional.conv2d(tcx_g, tcw_g, padding=1)
            torch.autograd.grad(y, (tcx_g, tcw_g), y)
    # both libraries' defaults: TF32 products (zgrad.backends.cudnn.allow_tf32, torch's likewise)
    row("conv2d 3x3 fwd+bwd", f"{batch}x{channels}x{hw}x{hw}", "GFLOP/s", 3 * flops, zgrad_conv_step, torch_conv_step,
        repeat=5)
    zgrad.backends.cudnn.allow_tf32 = False
    if torch:
        torch.backends.cudnn.allow_tf32 = False
    row("conv2d 3x3 fwd+bwd fp32", f"{batch}x{channels}x{hw}x{hw}", "GFLOP/s", 3 * flops, zgrad_conv_step,
        torch_conv_step, repeat=5)
    zgrad.backends.cudnn.allow_tf32 = True
    if torch:
        torch.backends.cudnn.allow_tf32 = True

    _attention_rows(row, dev, tdev, torch, quick)

    from zgrad.kernels.cuda import runtime as rt
    host = rt.pinned_pool().lease((n,), f32)
    host[:] = 1.0
    row("host->device (pinned)", label, "GB/s", 4 * n, lambda: DeviceArray.from_host(host), repeat=5)
    row("device->host (pinned)", label, "GB/s", 4 * n, lambda: a.to_host(out=host), repeat=5)
    return [dataclasses.replace(r, peak=None) if r.name.startswith(("host->", "device->")) else r for r in rows]


def _row_kernel_rows(row: Callable, dev: Callable, tdev: Callable, torch, rows: int, cols: int) -> None:
    """Layer norm (forward; forward + backward) and cross-entropy over (rows, cols) float32, the
    issue's row kernels besides softmax, against torch's."""
    from zgrad.kernels.cuda import backend
    from zgrad.kernels.cuda.array import DeviceArray
    f32 = np.float32
    n = rows * cols
    x, grad = dev(rows, cols, 1), dev(rows, cols, 1)
    weight, bias = dev(cols), dev(cols)
    out, mean, invstd = DeviceArray.empty((rows, cols, 1), f32), DeviceArray.empty((rows,), f32), DeviceArray.empty((rows,), f32)
    grads = [DeviceArray.empty(shape, f32) for shape in ((rows, cols, 1), (cols,), (cols,))]

    def zgrad_norm():
        backend.group_norm(x, weight, bias, 1, 1e-5, out, mean, invstd)

    def zgrad_norm_step():
        zgrad_norm()
        backend.group_norm_backward(grad, x, weight, mean, invstd, 1, *grads)

    torch_norm = torch_norm_step = None
    if torch:
        tx, tw, tb, tgrad = tdev(rows, cols), tdev(cols), tdev(cols), tdev(rows, cols)

        def torch_norm():
            torch.nn.functional.layer_norm(tx, (cols,), tw, tb)

        txg, twg, tbg = tx.clone().requires_grad_(), tw.clone().requires_grad_(), tb.clone().requires_grad_()

        def torch_norm_step():
            y = torch.nn.functional.layer_norm(txg, (cols,), twg, tbg)
            torch.autograd.grad(y, (txg, twg, tbg), tgrad)
    size = f"{rows}x{cols}"
    row("layer_norm", size, "GB/s", 2 * 4 * n, zgrad_norm, torch_norm)
    row("layer_norm fwd+bwd", size, "GB/s", 7 * 4 * n, zgrad_norm_step, torch_norm_step, repeat=10)

    logits = x.reshape(rows, cols)
    rng = np.random.default_rng(1)
    targets = DeviceArray.from_host(rng.integers(0, cols, rows))
    probs = DeviceArray.empty((rows, cols), f32)
    loss, divisor = DeviceArray.empty((), f32), DeviceArray.empty((), f32)
    torch_ce = None
    if torch:
        tlogits, ttargets = tdev(rows, cols), torch.tensor(rng.integers(0, cols, rows), device="cuda")

        def torch_ce():
            torch.nn.functional.cross_entropy(tlogits, ttargets)
    row("cross_entropy", size, "GB/s", 2 * 4 * n,
        lambda: backend.cross_entropy(logits, targets, -100, True, probs, loss, divisor), torch_ce)


def _attention_rows(row: Callable, dev: Callable, tdev: Callable, torch, quick: bool,
                    shape: tuple[int, int, int, int] | None = None) -> None:
    """Causal attention forward + backward at minGPT's shape (batch 32, 8 heads, 256 tokens, head
    dim 64): as cuBLAS products (the path a GPU with cuBLAS takes) and as the fused kernels (the
    path without it), against torch's SDPA. The rate counts the six products of a pass without
    the causal saving (2 forward, 4 backward; the backward's recomputed scores not counted)."""
    from zgrad.kernels.cuda import attention, backend
    from zgrad.kernels.cuda.array import DeviceArray
    shape = shape or (8 if quick else 32, 8, 256, 64)
    batch, heads, length, dim = shape
    q, k, v, grad = (dev(*shape) for _ in range(4))
    out, lse = DeviceArray.empty(shape, np.float32), DeviceArray.empty(shape[:3], np.float32)
    grads = [DeviceArray.empty(shape, np.float32) for _ in range(3)]
    scale = 1.0 / dim ** 0.5

    def zgrad_step():
        backend.attention(q, k, v, None, scale, True, 0, 0, 1.0, out, lse)
        backend.attention_backward(grad, q, k, v, None, out, lse, scale, True, 0, 0, 1.0, *grads, None)

    torch_step = None
    if torch:
        tq, tk, tv = (tdev(*shape).requires_grad_() for _ in range(3))
        tgrad = tdev(*shape)

        def torch_step():
            y = torch.nn.functional.scaled_dot_product_attention(tq, tk, tv, is_causal=True)
            torch.autograd.grad(y, (tq, tk, tv), tgrad)
    flops = 6 * 2.0 * batch * heads * length * length * dim
    size = "x".join(map(str, shape))
    row("sdpa causal fwd+bwd (cuBLAS products)", size, "GFLOP/s", flops, zgrad_step, torch_step, repeat=5)
    by_products = attention._by_products
    attention._by_products = lambda _q: False
    try:
        row("sdpa causal fwd+bwd (fused kernels)", size, "GFLOP/s", flops, zgrad_step, torch_step, repeat=2)
    finally:
        attention._by_products = by_products


def format_table(rows: list[CudaRow], device: str) -> str:
    header = ("CUDA kernel", "size", "zgrad ms", "achieved", "peak", "% peak", "torch ms", "time vs torch")
    lines = [
        (r.name, r.size, f"{r.zgrad_ms:.3f}", f"{r.zgrad_rate:,.0f} {r.unit}",
         "-" if not r.peak else f"{r.peak:,.0f}", "-" if r.percent_of_peak is None else f"{r.percent_of_peak:.0f}%",
         "-" if r.torch_ms is None else f"{r.torch_ms:.3f}",
         "-" if r.time_vs_torch is None else f"{r.time_vs_torch:.2f}x")
        for r in rows
    ]
    widths = [max(len(str(cell)) for cell in column) for column in zip(header, *lines)]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths)
    return "\n".join([f"device: {device}", fmt.format(*header), fmt.format(*("-" * w for w in widths)),
                      *(fmt.format(*ln) for ln in lines)])


def run(quick: bool) -> dict:
    """The section's result: ``{"status": "no GPU (why)"}`` or the device, rows and table."""
    status = gpu_status()
    if status is not None:
        return {"status": status}
    from zgrad.kernels.cuda import backend
    props = backend.device_properties()
    device = (f"{props['name']}, sm_{props['compute_capability'][0]}{props['compute_capability'][1]}, "
              f"{props['multiprocessors']} SMs")
    rows = cuda_rows(quick)
    return {"status": "ok", "device": {**props, "compute_capability": list(props["compute_capability"])},
            "rows": [{**dataclasses.asdict(r), "percent_of_peak": r.percent_of_peak, "time_vs_torch": r.time_vs_torch}
                     for r in rows],
            "table": format_table(rows, device)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="smaller sizes")
    args = parser.parse_args(argv)
    print(json.dumps(run(args.quick)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
