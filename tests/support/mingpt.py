"""A port of the GPT of pytorch/examples ``distributed/minGPT-ddp`` (``mingpt/model.py``), written
once against the API torch and zgrad share: :func:`gpt_classes` defines the modules for ``lib``
(``torch`` or ``zgrad``), so one definition runs on both.

The structure and parameter names are the example's: an embedding stem (token ``Embedding`` and a
learned position parameter), blocks of pre-norm ``LayerNorm`` -> ``nn.MultiheadAttention``
(``batch_first=True``) with a causal mask cut from a ``tril`` buffer -> ``c_proj``, and
``LayerNorm`` -> MLP with ``GELU``, then a final norm and a bias-free head; GPT-2's initialization
(normal(0, 0.02), the residual projections scaled by 1/sqrt(2 n_layer)); AdamW over two groups
(decay for Linear and in-projection weights, none for biases, norms, embeddings and positions).

One deliberate difference: the example passes the float ``tril`` of ones as ``attn_mask``, which
MultiheadAttention *adds* to the scores (so nothing is masked); this port passes ``tril == 0`` as
a bool mask, which masks the future as the example intends.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

__all__ = ["GPTConfig", "create_optimizer", "gpt_classes"]


@dataclass
class GPTConfig:
    n_layer: int = 2
    n_head: int = 2
    n_embd: int = 64
    vocab_size: int = 50
    block_size: int = 32
    embd_pdrop: float = 0.0
    resid_pdrop: float = 0.0
    attn_pdrop: float = 0.0


@functools.lru_cache(maxsize=None)
def gpt_classes(lib: Any) -> SimpleNamespace:
    """The GPT modules (``GPT``, ``Block``, ``MultiheadAttentionLayer``, ``EmbeddingStem``) on ``lib``."""
    nn, F = lib.nn, lib.nn.functional

    class MultiheadAttentionLayer(nn.Module):
        """Masked multi-head self-attention, then a projection."""

        def __init__(self, config: GPTConfig, dtype: Any) -> None:
            super().__init__()
            self.resid_drop = nn.Dropout(config.resid_pdrop)
            self.c_proj = nn.Linear(config.n_embd, config.n_embd, dtype=dtype)
            size = config.block_size
            self.register_buffer("mask", lib.tril(lib.ones(size, size, dtype=dtype)).view(1, 1, size, size))
            self.attn = nn.MultiheadAttention(embed_dim=config.n_embd, num_heads=config.n_head,
                                              dropout=config.attn_pdrop, batch_first=True, dtype=dtype)

        def forward(self, x: Any) -> Any:
            length = x.size(1)
            future = self.mask[0, 0, :length, :length] == 0
            y = self.attn(x, x, x, attn_mask=future)[0]
            return self.resid_drop(self.c_proj(y))

    class Block(nn.Module):
        def __init__(self, config: GPTConfig, dtype: Any) -> None:
            super().__init__()
            self.ln1 = nn.LayerNorm(config.n_embd, dtype=dtype)
            self.ln2 = nn.LayerNorm(config.n_embd, dtype=dtype)
            self.attn = MultiheadAttentionLayer(config, dtype)
            self.mlp = nn.Sequential(nn.Linear(config.n_embd, 4 * config.n_embd, dtype=dtype), nn.GELU(),
                                     nn.Linear(4 * config.n_embd, config.n_embd, dtype=dtype),
                                     nn.Dropout(config.resid_pdrop))

        def forward(self, x: Any) -> Any:
            x = x + self.attn(self.ln1(x))
            return x + self.mlp(self.ln2(x))

    class EmbeddingStem(nn.Module):
        def __init__(self, config: GPTConfig, dtype: Any) -> None:
            super().__init__()
            self.tok_emb = nn.Embedding(config.vocab_size, config.n_embd, dtype=dtype)
            self.pos_emb = nn.Parameter(lib.zeros(1, config.block_size, config.n_embd, dtype=dtype))
            self.drop = nn.Dropout(config.embd_pdrop)
            self.block_size = config.block_size

        def forward(self, idx: Any) -> Any:
            length = idx.size(1)
            if length > self.block_size:
                raise ValueError(f"Cannot forward sequence of length {length}, block size is only {self.block_size}")
            return self.drop(self.tok_emb(idx) + self.pos_emb[:, :length, :])

    class GPT(nn.Module):
        def __init__(self, config: GPTConfig, dtype: Any) -> None:
            super().__init__()
            self.block_size = config.block_size
            self.emb_stem = EmbeddingStem(config, dtype)
            self.blocks = nn.Sequential(*[Block(config, dtype) for _ in range(config.n_layer)])
            self.ln_f = nn.LayerNorm(config.n_embd, dtype=dtype)
            self.head = nn.Linear(config.n_embd, config.vocab_size, bias=False, dtype=dtype)
            self.apply(self._init_weights)
            with lib.no_grad():
                for name, p in self.named_parameters():
                    if name.endswith("c_proj.weight"):
                        p.normal_(mean=0.0, std=0.02 / math.sqrt(2 * config.n_layer))

        @staticmethod
        def _init_weights(module: Any) -> None:
            with lib.no_grad():
                if isinstance(module, (nn.Linear, nn.Embedding)):
                    module.weight.normal_(mean=0.0, std=0.02)
                    if isinstance(module, nn.Linear) and module.bias is not None:
                        module.bias.zero_()
                elif isinstance(module, nn.LayerNorm):
                    module.bias.zero_()
                    module.weight.fill_(1.0)

        def forward(self, idx: Any, targets: Any = None) -> tuple[Any, Any]:
            logits = self.head(self.ln_f(self.blocks(self.emb_stem(idx))))
            loss = None
            if targets is not None:
                loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1), ignore_index=-1)
            return logits, loss

    return SimpleNamespace(GPT=GPT, Block=Block, MultiheadAttentionLayer=MultiheadAttentionLayer,
                           EmbeddingStem=EmbeddingStem)


def create_optimizer(lib: Any, model: Any, learning_rate: float = 3e-4, weight_decay: float = 0.1) -> Any:
    """AdamW (betas 0.9, 0.95) with weight decay on Linear weights and the attention's in-projection
    only, as the example's ``create_optimizer``."""
    decay, no_decay = set(), set()
    for module_name, module in model.named_modules():
        for name, _ in module.named_parameters():
            full_name = f"{module_name}.{name}" if module_name else name
            if name.endswith("bias"):
                no_decay.add(full_name)
            elif (name.endswith("weight") and isinstance(module, lib.nn.Linear)) or name.endswith("in_proj_weight"):
                decay.add(full_name)
            elif (name.endswith("weight") and isinstance(module, (lib.nn.LayerNorm, lib.nn.Embedding))) or \
                    name.endswith("pos_emb"):
                no_decay.add(full_name)
    params = dict(model.named_parameters())
    if decay & no_decay or params.keys() - (decay | no_decay):
        raise ValueError(f"parameters not split into decay/no_decay: {sorted(params.keys() - (decay | no_decay))}, "
                         f"in both: {sorted(decay & no_decay)}")
    groups = [{"params": [params[n] for n in sorted(decay)], "weight_decay": weight_decay},
              {"params": [params[n] for n in sorted(no_decay)], "weight_decay": 0.0}]
    return lib.optim.AdamW(groups, lr=learning_rate, betas=(0.9, 0.95))
