"""pytorch/examples ``distributed/minGPT-ddp/mingpt/main.py`` ported to zgrad, started by
``zgrad-run`` as upstream is started by torchrun.

The port: ``torch`` renamed to ``zgrad``; the device is the CPU (upstream exits without two
GPUs); the default generator seeded before ``random_split`` (upstream assumes every rank
draws the same split, which torch 2.13's non-deterministic default seed does not give); Hydra replaced by the same configuration (``gpt2_train_cfg.yaml``'s, with a local corpus)
as a dict, overridden from the command line in Hydra's ``section.key=value`` form:

    zgrad-run --standalone --nproc-per-node 2 main.py data_config.path=input.txt gpt_config.n_layer=2
"""

import sys

import zgrad
from char_dataset import CharDataset, DataConfig
from model import GPT, GPTConfig, OptimizerConfig, create_optimizer
from trainer import Trainer, TrainerConfig
from zgrad.distributed import destroy_process_group, init_process_group
from zgrad.utils.data import random_split

CONFIG = {
    "data_config": {"path": "input.txt", "block_size": 128, "train_split": 0.9, "truncate": 0.05},
    "gpt_config": {"n_layer": 8, "n_head": 8, "n_embd": 512},
    "trainer_config": {"max_epochs": 10, "batch_size": 216, "data_loader_workers": 4, "grad_norm_clip": 1.0,
                       "snapshot_path": "gpt_snapshot.pt", "save_every": 3, "use_amp": True},
    "optimizer_config": {"weight_decay": 0.1, "learning_rate": 0.0003},
}


def overridden(config: dict, overrides: list[str]) -> dict:
    """``config`` with Hydra-style ``section.key=value`` overrides (values as Python literals, else strings)."""
    import ast

    for item in overrides:
        dotted, _, text = item.partition("=")
        section, _, key = dotted.partition(".")
        try:
            value = ast.literal_eval(text)
        except (ValueError, SyntaxError):
            value = text
        config[section][key] = value
    return config


def ddp_setup():
    init_process_group(backend=zgrad.distributed.get_default_backend_for_device(zgrad.device("cpu")))


def get_train_objs(gpt_cfg: GPTConfig, opt_cfg: OptimizerConfig, data_cfg: DataConfig):
    zgrad.manual_seed(0)  # the port's addition: every rank must draw the same random_split
    dataset = CharDataset(data_cfg)
    train_len = int(len(dataset) * data_cfg.train_split)
    train_set, test_set = random_split(dataset, [train_len, len(dataset) - train_len])

    gpt_cfg.vocab_size = dataset.vocab_size
    gpt_cfg.block_size = dataset.block_size
    model = GPT(gpt_cfg)
    optimizer = create_optimizer(model, opt_cfg)

    return model, optimizer, train_set, test_set


def main(cfg: dict):
    ddp_setup()

    gpt_cfg = GPTConfig(**cfg["gpt_config"])
    opt_cfg = OptimizerConfig(**cfg["optimizer_config"])
    data_cfg = DataConfig(**cfg["data_config"])
    trainer_cfg = TrainerConfig(**cfg["trainer_config"])

    model, optimizer, train_data, test_data = get_train_objs(gpt_cfg, opt_cfg, data_cfg)
    trainer = Trainer(trainer_cfg, model, optimizer, train_data, test_data)
    trainer.train()

    destroy_process_group()


if __name__ == "__main__":
    main(overridden(CONFIG, sys.argv[1:]))
