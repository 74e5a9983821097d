"""The built-in demo: train an MLP on synthetic spirals, on this process.

Run with ``python -m zgrad.demo``. Prints one line per epoch (loss, accuracy, ms per step) and
a summary, and exits non-zero if the model misses the target accuracy.
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np

import zgrad
import zgrad.nn.functional as F
from zgrad import nn
from zgrad.launch.data import spirals

TARGET_ACCURACY = 0.90


def build_model(hidden: int) -> nn.Module:
    return nn.Sequential(nn.Linear(2, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(), nn.Linear(hidden, 3))


def accuracy(model: nn.Module, x: np.ndarray, y: np.ndarray) -> float:
    with zgrad.no_grad():
        logits = model(zgrad.from_numpy(x)).numpy()
    return float((logits.argmax(axis=1) == y).mean())


def demo_parser(description: str, epochs: int, batch_size_help: str | None = None,
                launched: bool = False) -> argparse.ArgumentParser:
    """The arguments the demos share: ``--epochs``, ``--batch-size``, ``--hidden``, ``--lr`` and
    ``--seed``; a launched demo (data from :func:`spirals`, a target accuracy) also takes
    ``--samples`` and ``--no-target``."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--epochs", type=int, default=epochs)
    parser.add_argument("--batch-size", type=int, default=64, help=batch_size_help)
    parser.add_argument("--hidden", type=int, default=64)
    parser.add_argument("--lr", type=float, default=0.01)
    parser.add_argument("--seed", type=int, default=0)
    if launched:
        parser.add_argument("--samples", type=int, default=3000)
        parser.add_argument("--no-target", dest="require_target", action="store_false",
                            help="exit 0 even if the target accuracy is missed (short runs)")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = demo_parser(__doc__.splitlines()[0], epochs=12).parse_args(argv)

    zgrad.manual_seed(args.seed)
    x_train, y_train = spirals(3000, seed=args.seed)
    x_test, y_test = spirals(1000, seed=args.seed + 1)
    model = build_model(args.hidden)
    optimizer = zgrad.optim.Adam(model.parameters(), lr=args.lr)
    steps_per_epoch = len(x_train) // args.batch_size
    started = time.perf_counter()
    for epoch in range(1, args.epochs + 1):
        epoch_start, total_loss = time.perf_counter(), 0.0
        for step in range(steps_per_epoch):
            batch = slice(step * args.batch_size, (step + 1) * args.batch_size)
            loss = F.cross_entropy(model(zgrad.from_numpy(x_train[batch])), zgrad.from_numpy(y_train[batch]))
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            total_loss += loss.item()
        ms_per_step = (time.perf_counter() - epoch_start) * 1e3 / steps_per_epoch
        print(f"epoch {epoch:2d}  loss {total_loss / steps_per_epoch:.4f}  "
              f"test accuracy {accuracy(model, x_test, y_test):6.1%}  {ms_per_step:.2f} ms/step", flush=True)
    return report_final(accuracy(model, x_test, y_test), started)


def report_final(final: float, started: float, require_target: bool = True, show: bool = True) -> int:
    """Print a demo's final test accuracy against the target (unless not ``show``); the exit
    status: 0 when the target is reached or not required."""
    if show:
        verdict = "reached" if final >= TARGET_ACCURACY else "MISSED"
        print(f"done: test accuracy {final:.1%} ({verdict} the {TARGET_ACCURACY:.0%} target) "
              f"in {time.perf_counter() - started:.1f} s", flush=True)
    return 0 if final >= TARGET_ACCURACY or not require_target else 1


if __name__ == "__main__":
    sys.exit(main())
