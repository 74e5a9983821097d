"""What autocast costs when it is off, and GradScaler's unscale pass, beside PyTorch.

- ``off``: an autocast-marked op (``F.linear``, ``zgrad.mm``, ``F.mse_loss``) called plainly and
  inside ``autocast(enabled=False)``, against the same function without its autocast wrapper
  (``__wrapped__``), on small inputs where the per-call cost shows most; torch's times beside it.
- ``unscale``: ``GradScaler.unscale_`` then ``update`` over four float32 gradients of 1M elements
  (one fused pass per gradient) against torch's ``GradScaler("cpu")`` (scale 1, so the values stay).

Prints a table of ratios and writes ``bench/results/amp.json``. Run: ``python bench/amp.py``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import timeit
from pathlib import Path
from typing import Any, Callable

import numpy as np

import zgrad
import zgrad.nn.functional as F

try:
    import torch
except ImportError:  # the zgrad columns still run
    torch = None

RESULTS = Path(__file__).resolve().parent / "results"


def best_us(fn: Callable[[], Any], number: int, repeat: int) -> float:
    fn()
    return min(timeit.repeat(fn, number=number, repeat=repeat)) / number * 1e6


def off_rows(number: int, repeat: int) -> list[dict]:
    rng = np.random.default_rng(0)
    x, w, y = (rng.standard_normal(s).astype(np.float32) for s in ((8, 16), (16, 16), (8, 16)))
    zx, zw, zy = zgrad.tensor(x), zgrad.tensor(w, requires_grad=True), zgrad.tensor(y)
    ops = {
        "F.linear": (lambda f: f(zx, zw), F.linear, lambda: torch.nn.functional.linear(tx, tw)),
        "mm": (lambda f: f(zx, zw), zgrad.mm, lambda: torch.mm(tx, tw)),
        "F.mse_loss": (lambda f: f(zx, zy), F.mse_loss, lambda: torch.nn.functional.mse_loss(tx, ty)),
    }
    if torch is not None:
        tx, tw, ty = torch.tensor(x), torch.tensor(w, requires_grad=True), torch.tensor(y)
    regions = {"no region": contextlib.nullcontext, "autocast(enabled=False)": lambda: zgrad.autocast("cpu", enabled=False)}
    rows = []
    for name, (call, fn, torch_call) in ops.items():
        bare = best_us(lambda: call(fn.__wrapped__), number, repeat)
        torch_us = best_us(torch_call, number, repeat) if torch is not None else float("nan")
        for region_name, region in regions.items():
            with region():
                marked = best_us(lambda: call(fn), number, repeat)
            rows.append({"op": name, "region": region_name, "marked_us": marked, "bare_us": bare,
                         "ratio": marked / bare, "torch_us": torch_us})
    return rows


def unscale_rows(size: int, count: int, repeat: int) -> list[dict]:
    grads = [np.random.default_rng(i).standard_normal(size).astype(np.float32) for i in range(count)]

    def prepared(lib: Any) -> Callable[[], None]:
        params = [lib.nn.Parameter(lib.zeros(size)) for _ in grads]
        for p, g in zip(params, grads):
            p.grad = lib.tensor(g)
        opt = lib.optim.SGD(params, lr=0.1)
        scaler = lib.amp.GradScaler("cpu", init_scale=1.0)
        scaler.scale(lib.ones(1))

        def unscale_and_update() -> None:
            scaler.unscale_(opt)
            scaler.update()

        return unscale_and_update

    zgrad_us = best_us(prepared(zgrad), 5, repeat)
    torch_us = best_us(prepared(torch), 5, repeat) if torch is not None else float("nan")
    return [{"gradients": f"{count} x {size}", "zgrad_us": zgrad_us, "torch_us": torch_us, "ratio": zgrad_us / torch_us}]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer calls per timing")
    args = parser.parse_args()
    number, repeat = (2000, 3) if args.quick else (20000, 5)
    if torch is not None:
        torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    off = off_rows(number, repeat)
    print(f"{'op':<12} {'region':<26} {'marked us':>10} {'bare us':>9} {'marked/bare':>12} {'torch us':>9}")
    for r in off:
        print(f"{r['op']:<12} {r['region']:<26} {r['marked_us']:>10.2f} {r['bare_us']:>9.2f} {r['ratio']:>11.3f}x "
              f"{r['torch_us']:>9.2f}")
    unscale = unscale_rows(1 << 20, 4, repeat)
    for r in unscale:
        print(f"unscale_ {r['gradients']}: zgrad {r['zgrad_us']:.0f} us, torch {r['torch_us']:.0f} us, "
              f"{r['ratio']:.2f}x torch's time")
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "amp.json").write_text(json.dumps({"off": off, "unscale": unscale}, indent=2))


if __name__ == "__main__":
    main()
