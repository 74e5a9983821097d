"""pytorch/examples ``word_language_model`` (ported in ``tests/support/examples_word_language_model/``:
``torch`` renamed to ``zgrad``, nothing else) on a small synthetic corpus: each of its models (LSTM,
tied LSTM, GRU, RNN_TANH, Transformer) trains an epoch with the example's plain SGD (and the
Transformer with AdamW too) and ``clip_grad_norm_``, and is validated, as the same program does
on torch: from the same initial
weights, in float64, dropout off, the loss agrees at every step and the validation loss it prints
agrees.

The program does not reach its end on zgrad: after the epoch it saves the whole model
(``torch.save(model, f)``, a pickle), and ``zgrad.save`` stores no pickles; it raises the error
that says to save the ``state_dict()`` instead, which these tests expect."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

import zgrad
from example_ports import comparable, run_program
from helpers import require_torch
from paths import SUPPORT

pytestmark = pytest.mark.timeout(300)

PROGRAM = SUPPORT / "examples_word_language_model" / "main.py"
# the Transformer as the example's README trains it (its default lr of 20 diverges), by SGD and by AdamW
MODELS = [["--model", "LSTM"], ["--model", "LSTM", "--tied"], ["--model", "GRU"], ["--model", "RNN_TANH"],
          ["--model", "Transformer", "--lr", "5"], ["--model", "Transformer", "--use-optimizer", "--lr", "0.001"]]
# 280 training tokens in 4 columns of 70, cut into sequences of 8: nine steps
SMALL = ["--data", "corpus", "--emsize", "16", "--nhid", "16", "--nlayers", "2", "--bptt", "8", "--batch_size", "4",
         "--epochs", "1", "--log-interval", "2"]
NO_MODULE_SAVE = ("zgrad.save cannot store a (RNNModel|TransformerModel) object at obj: "
                  ".* save its state_dict\\(\\) instead")
LOGGED = re.compile(r"^\| epoch   1 \|\s+(\d)/    8 batches \| lr [0-9.]+ \| ms/batch\s+[0-9.]+ \| loss\s+([0-9.]+) \|",
                    re.MULTILINE)
VALID = re.compile(r"\| valid loss\s+([0-9.]+) \| valid ppl\s+([0-9.]+)$", re.MULTILINE)


def corpus(directory: Path) -> None:
    """train.txt (40 sentences, 240 words), valid.txt and test.txt (10 each) of a 12-word language."""
    rng = np.random.default_rng(0)
    directory.mkdir()
    for name, count in (("train", 40), ("valid", 10), ("test", 10)):
        sentences = [" ".join(["the", rng.choice(["cat", "dog"]), rng.choice(["sat", "ran"]), rng.choice(["on", "under"]),
                               "a", rng.choice(["mat", "rug", "bed"])]) for _ in range(count)]
        (directory / f"{name}.txt").write_text("\n".join(sentences) + "\n")


def train(lib, model: list[str]) -> tuple[str, str]:
    """Run the program on ``lib`` until it has trained and validated an epoch; what it printed."""
    with pytest.raises(TypeError, match=NO_MODULE_SAVE) as error:
        run_program(PROGRAM, [*SMALL, *model], lib)
    return "\n".join(error.value.__notes__)


@pytest.mark.parametrize("model", MODELS, ids=" ".join)
def test_word_language_model_trains_then_cannot_save_the_model(tmp_path, monkeypatch, model):
    monkeypatch.chdir(tmp_path)
    corpus(tmp_path / "corpus")
    out = train(zgrad, [*model, "--dropout", "0.2"])
    logged = LOGGED.findall(out)
    assert [int(batch) for batch, _ in logged] == [2, 4, 6, 8], out
    assert float(logged[-1][1]) < float(logged[0][1]) and len(VALID.findall(out)) == 1, out


@pytest.mark.torch
@pytest.mark.parametrize("model", MODELS, ids=" ".join)
def test_word_language_model_trains_as_on_torch(tmp_path, monkeypatch, model):
    torch = require_torch()
    monkeypatch.chdir(tmp_path)
    corpus(tmp_path / "corpus")
    with comparable(torch) as expected:
        expected_out = run_program(PROGRAM, [*SMALL, *model], torch)
    with comparable(zgrad, expected.states) as got:
        out = train(zgrad, model)
    assert len(got.losses) == len(expected.losses) == 9
    np.testing.assert_allclose(got.losses, expected.losses, rtol=1e-10)
    assert VALID.findall(out) == VALID.findall(expected_out)[:1]
