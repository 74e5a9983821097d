"""pytorch/examples ``distributed/minGPT-ddp/mingpt/char_dataset.py`` ported to zgrad: ``torch``
renamed to ``zgrad``; ``fsspec.open`` replaced by ``open`` (the test's corpus is a local file)."""

from dataclasses import dataclass

import zgrad
from zgrad.utils.data import Dataset


@dataclass
class DataConfig:
    path: str = None
    block_size: int = None
    train_split: float = None
    truncate: float = 1.0


class CharDataset(Dataset):

    def __init__(self, data_cfg: DataConfig):
        with open(data_cfg.path, "rb") as f:
            data = f.read().decode("utf-8")
        data = data[: int(len(data) * data_cfg.truncate)]

        chars = sorted(set(data))
        data_size, vocab_size = len(data), len(chars)
        print("Data has %d characters, %d unique." % (data_size, vocab_size))

        self.stoi = {ch: i for i, ch in enumerate(chars)}
        self.itos = {i: ch for i, ch in enumerate(chars)}
        self.block_size = data_cfg.block_size
        self.vocab_size = vocab_size
        self.data = data

    def __len__(self):
        return len(self.data) - self.block_size

    def __getitem__(self, idx):
        chunk = self.data[idx:idx + self.block_size + 1]  # block_size + 1 characters
        dix = [self.stoi[s] for s in chunk]
        x = zgrad.tensor(dix[:-1], dtype=zgrad.long)
        y = zgrad.tensor(dix[1:], dtype=zgrad.long)
        return x, y
