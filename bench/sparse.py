"""Sparse COO tensors beside PyTorch's: the products of a graph network, and a training step of one.

- ``spmm``: a Cora-sized normalized adjacency matrix (2,708 nodes, about 13,000 entries with the
  self-loops) times a dense 2,708 x 16 matrix, forward only and forward + backward (the gradient of
  the dense factor and of the sparse values, the sparse matrix made from them in each call).
- ``features``: the sparse feature matrix (2,708 x 1,433, 1.3% nonzero, about 50,000 entries) times
  a 1,433 x 16 weight, forward + backward (the weight's gradient).
- ``gcn step``: pytorch/examples gcn's step: two graph convolutions, ReLU, log-softmax, NLL loss,
  backward and an Adam step (no dropout).
- ``to_sparse``: converting the dense 2,708 x 2,708 adjacency matrix, as the example's loader does.

Each row alternates zgrad and torch in rounds (best of ``--number`` calls each) and reports the
median of the per-round ratios of zgrad's time to torch's. Prints a table and writes
``bench/results/sparse.json``. Run: ``python bench/sparse.py`` (``--quick``: fewer rounds).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import timeit
from pathlib import Path
from typing import Any, Callable

import numpy as np

import zgrad

try:
    import torch
except ImportError:  # the zgrad column still runs
    torch = None

RESULTS = Path(__file__).resolve().parent / "results"
NODES, EDGES, WORDS, HIDDEN, CLASSES = 2708, 5278, 1433, 16, 7


def cora_like(seed: int = 0) -> dict[str, np.ndarray]:
    """A random graph and features of Cora's sizes: the normalized adjacency (with self-loops) and
    the row-normalized binary features, both dense, and labels."""
    rng = np.random.default_rng(seed)
    adjacency = np.eye(NODES)
    a, b = rng.integers(0, NODES, size=(2, EDGES))
    adjacency[a, b] = adjacency[b, a] = 1.0
    degree = 1 / np.sqrt(adjacency.sum(1))
    features = (rng.random((NODES, WORDS)) < 0.0127).astype(np.float64)
    features /= np.maximum(features.sum(1, keepdims=True), 1)
    return {"adjacency": adjacency * degree[:, None] * degree[None, :], "features": features,
            "labels": rng.integers(0, CLASSES, size=NODES), "hidden": rng.standard_normal((NODES, HIDDEN)),
            "w1": rng.standard_normal((WORDS, HIDDEN)) * 0.05, "w2": rng.standard_normal((HIDDEN, CLASSES)) * 0.3}


def cases(lib: Any, data: dict[str, np.ndarray]) -> dict[str, Callable[[], Any]]:
    """The timed calls on ``lib`` (zgrad or torch), float32."""
    f32 = lib.float32
    adjacency = lib.tensor(data["adjacency"], dtype=f32).to_sparse()
    features = lib.tensor(data["features"], dtype=f32).to_sparse()
    dense_adjacency = lib.tensor(data["adjacency"], dtype=f32)
    hidden = lib.tensor(data["hidden"], dtype=f32, requires_grad=True)
    edge_weights = adjacency._values().clone().requires_grad_()
    w1 = lib.nn.Parameter(lib.tensor(data["w1"], dtype=f32))
    w2 = lib.nn.Parameter(lib.tensor(data["w2"], dtype=f32))
    labels = lib.tensor(data["labels"])
    optimizer = lib.optim.Adam([w1, w2], lr=0.01)

    def spmm_backward() -> None:
        weighted = lib.sparse_coo_tensor(adjacency._indices(), edge_weights, adjacency.shape, is_coalesced=True)
        lib.sparse.mm(weighted, hidden).sum().backward()

    def features_backward() -> None:
        lib.mm(features, w1).sum().backward()

    def gcn_step() -> None:
        optimizer.zero_grad()
        x = lib.spmm(adjacency, lib.mm(features, w1)).relu()
        out = lib.nn.functional.log_softmax(lib.spmm(adjacency, lib.mm(x, w2)), dim=1)
        lib.nn.functional.nll_loss(out, labels).backward()
        optimizer.step()

    return {"spmm forward": lambda: lib.spmm(adjacency, hidden.detach()), "spmm forward+backward": spmm_backward,
            "features forward+backward": features_backward, "gcn step": gcn_step,
            "to_sparse": lambda: dense_adjacency.to_sparse()}


def best_us(fn: Callable[[], Any], number: int) -> float:
    return min(timeit.repeat(fn, number=number, repeat=3)) / number * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--number", type=int, default=10)
    parser.add_argument("--quick", action="store_true", help="3 rounds")
    args = parser.parse_args()
    rounds = 3 if args.quick else args.rounds
    data = cora_like()
    libs = {"zgrad": cases(zgrad, data)}
    if torch is not None:
        torch.set_num_threads(1)
        libs["torch"] = cases(torch, data)
    for calls in libs.values():
        for fn in calls.values():
            fn()  # compile and warm up
    rows = []
    for name in libs["zgrad"]:
        times: dict[str, list[float]] = {lib: [] for lib in libs}
        for _ in range(rounds):
            for lib, calls in libs.items():
                times[lib].append(best_us(calls[name], args.number))
        row = {"case": name, "zgrad_us": statistics.median(times["zgrad"])}
        if "torch" in times:
            row["torch_us"] = statistics.median(times["torch"])
            row["ratio"] = statistics.median(z / t for z, t in zip(times["zgrad"], times["torch"]))
        rows.append(row)
    print(f"{'case':<28}{'zgrad µs':>12}{'torch µs':>12}{'zgrad/torch':>14}")
    for row in rows:
        print(f"{row['case']:<28}{row['zgrad_us']:>12.1f}{row.get('torch_us', float('nan')):>12.1f}"
              f"{row.get('ratio', float('nan')):>13.2f}x")
    RESULTS.mkdir(exist_ok=True)
    threads = {name: os.environ.get(name) for name in ("NUMBA_NUM_THREADS", "OMP_NUM_THREADS")}
    (RESULTS / "sparse.json").write_text(json.dumps({"rounds": rounds, "threads": threads, "rows": rows}, indent=2))


if __name__ == "__main__":
    main()
