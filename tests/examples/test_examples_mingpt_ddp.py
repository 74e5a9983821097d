"""pytorch/examples ``distributed/minGPT-ddp`` (ported in ``tests/support/mingpt_ddp/``: ``torch``
renamed to ``zgrad``, the GPUs to the CPU, Hydra to ``section.key=value`` arguments) runs as a
user runs it, under ``zgrad-run`` with two ranks: it trains, saves a snapshot, and a second run
resumes from it; with ``use_amp`` (float16 and bfloat16 autocast, GradScaler) it trains too.

The program's AMP branch clips the gradients while they are still scaled (it calls
``clip_grad_norm_`` before ``scaler.step`` without ``unscale_``), so AdamW's steps shrink towards
its epsilon and the run ends above the float32 run's loss (by 14% here; the arithmetic is torch's too); the 2% comparison
with float32 runs the AMP recipe in ``tests/nn/test_mingpt.py``."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from paths import SUPPORT
from run_harness import Launch, launcher_env, launches

PROGRAM = SUPPORT / "mingpt_ddp" / "main.py"
RUN_TIMEOUT_S = 240
SMALL = ["data_config.block_size=32", "data_config.truncate=1.0", "data_config.train_split=0.9",
         "gpt_config.n_layer=2", "gpt_config.n_head=2", "gpt_config.n_embd=64", "trainer_config.batch_size=16",
         "trainer_config.data_loader_workers=1", "trainer_config.save_every=1", "trainer_config.log_every=1",
         "optimizer_config.learning_rate=0.003"]
LOSS = re.compile(r"\[GPU(\d)\] Epoch (\d+) \| Iter (\d+) \| (Train|Eval) Loss ([0-9.]+)")

pytestmark = pytest.mark.timeout(4 * RUN_TIMEOUT_S)


def corpus(path: Path) -> Path:
    """A small text with structure for a character model to learn (the example reads tinyshakespeare)."""
    lines = [f"{a} sees {b} and {b} greets {a}." for a in ("anna", "bo", "cy", "dee") for b in ("eve", "fin", "gus")]
    path.write_text("\n".join(lines * 4) + "\n")
    return path


def train(cwd: Path, *overrides: str) -> dict[tuple[str, int], list[float]]:
    """Run the program to its end on two ranks; the losses it printed by (kind, epoch), rank 0's first."""
    args = ["--standalone", "--nproc-per-node", "2", str(PROGRAM), f"data_config.path={corpus(cwd / 'input.txt')}",
            f"trainer_config.snapshot_path={cwd / 'snapshot.pt'}", *SMALL, *overrides]
    launch = Launch(args, cwd, launcher_env())
    with launches(launch):
        code = launch.finish(RUN_TIMEOUT_S)
    assert code == 0, launch.output[-6000:]
    losses: dict[tuple[str, int], list[float]] = {}
    for rank, epoch, _, kind, value in sorted(LOSS.findall(launch.output), key=lambda m: (m[0], int(m[2]))):
        losses.setdefault((kind, int(epoch)), []).append(float(value))
    return losses, launch.output


def mean(values: list[float]) -> float:
    return sum(values) / len(values)


def test_trains_saves_and_resumes_from_its_snapshot(tmp_path):
    losses, output = train(tmp_path, "trainer_config.max_epochs=2", "trainer_config.use_amp=False")
    assert "Snapshot not found. Training model from scratch" in output
    assert output.count("Snapshot saved at epoch") == 2 and (tmp_path / "snapshot.pt").exists()
    assert mean(losses[("Eval", 2)]) < mean(losses[("Train", 1)][:2]) * 0.8, losses
    resumed, output = train(tmp_path, "trainer_config.max_epochs=3", "trainer_config.use_amp=False")
    assert "Resuming training from snapshot at Epoch 2" in output
    assert set(resumed) == {("Train", 3), ("Eval", 3)}
    assert mean(resumed[("Eval", 3)]) < mean(losses[("Train", 1)][:2]) * 0.8


@pytest.mark.parametrize("amp_dtype", ["float16", "bfloat16"])
def test_mixed_precision_trains(tmp_path, amp_dtype):
    losses, _ = train(tmp_path, "trainer_config.max_epochs=2", "trainer_config.use_amp=True",
                      f"trainer_config.amp_dtype={amp_dtype}")
    assert mean(losses[("Eval", 2)]) < mean(losses[("Train", 1)][:2]) * 0.8, losses
