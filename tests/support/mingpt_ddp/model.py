"""pytorch/examples ``distributed/minGPT-ddp/mingpt/model.py`` ported to zgrad: ``torch`` renamed
to ``zgrad``, nothing else. (As upstream, the attention mask is the float ``tril`` of ones, which
``MultiheadAttention`` adds to the scores rather than masking with; ``tests/support/mingpt.py``,
the version compared with torch step by step, masks as the example intends.)"""

import math
from dataclasses import dataclass

import zgrad
import zgrad.nn as nn
from zgrad.nn import functional as F


@dataclass
class GPTConfig:
    model_type: str = "gpt2"
    n_layer: int = None
    n_head: int = None
    n_embd: int = None
    vocab_size: int = 50257
    block_size: int = 1024
    embd_pdrop: float = 0.1
    resid_pdrop: float = 0.1
    attn_pdrop: float = 0.1


@dataclass
class OptimizerConfig:
    learning_rate: float = 3e-4
    weight_decay: float = 0.1


class MultiheadAttentionLayer(nn.Module):
    """Masked multi-head self-attention followed by a projection."""

    def __init__(self, config, device="cpu", dtype=zgrad.float32):
        super().__init__()
        assert config.n_embd % config.n_head == 0
        self.resid_drop = nn.Dropout(config.resid_pdrop)
        self.c_proj = nn.Linear(config.n_embd, config.n_embd, device=device, dtype=dtype)
        self.register_buffer("mask", zgrad.tril(zgrad.ones(config.block_size, config.block_size))
                             .view(1, 1, config.block_size, config.block_size))
        self.attn = zgrad.nn.MultiheadAttention(
            embed_dim=config.n_embd,
            num_heads=config.n_head,
            dropout=config.attn_pdrop,
            batch_first=True,
            device=device,
            dtype=dtype,
        )

    def forward(self, x):
        _, seq_size, _ = x.size()
        y = self.attn(x, x, x, attn_mask=self.mask[0, 0, :seq_size, :seq_size])[0]
        y = self.resid_drop(self.c_proj(y))
        return y


class Block(nn.Module):
    """A transformer block: attention and an MLP, each after a LayerNorm, each residual."""

    def __init__(self, config: GPTConfig):
        super().__init__()
        self.ln1 = nn.LayerNorm(config.n_embd)
        self.ln2 = nn.LayerNorm(config.n_embd)
        self.attn = MultiheadAttentionLayer(config)
        self.mlp = nn.Sequential(
            nn.Linear(config.n_embd, 4 * config.n_embd),
            nn.GELU(),
            nn.Linear(4 * config.n_embd, config.n_embd),
            nn.Dropout(config.resid_pdrop),
        )

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        x = x + self.mlp(self.ln2(x))
        return x


class EmbeddingStem(nn.Module):
    def __init__(self, config: GPTConfig, device="cpu", dtype=zgrad.float32):
        super().__init__()
        self.tok_emb = nn.Embedding(config.vocab_size, config.n_embd, device=device, dtype=dtype)
        self.pos_emb = nn.Parameter(zgrad.zeros(1, config.block_size, config.n_embd, device=device, dtype=dtype))
        self.drop = nn.Dropout(config.embd_pdrop)
        self.block_size = config.block_size

    def reset_parameters(self):
        self.tok_emb.reset_parameters()

    def forward(self, idx):
        b, t = idx.size()
        assert t <= self.block_size, f"Cannot forward sequence of length {t}, block size is only {self.block_size}"
        token_embeddings = self.tok_emb(idx)
        position_embeddings = self.pos_emb[:, :t, :]
        return self.drop(token_embeddings + position_embeddings)


class GPT(nn.Module):
    """GPT language model."""

    def __init__(self, config: GPTConfig):
        super().__init__()
        self.block_size = config.block_size
        config = self._set_model_config(config)

        self.emb_stem = EmbeddingStem(config)
        self.blocks = nn.Sequential(*[Block(config) for _ in range(config.n_layer)])
        self.ln_f = nn.LayerNorm(config.n_embd)
        self.head = nn.Linear(config.n_embd, config.vocab_size, bias=False)

        # GPT-2's initialization, the residual projections scaled down by the depth
        self.apply(self._init_weights)
        for pn, p in self.named_parameters():
            if pn.endswith("c_proj.weight"):
                p.data.normal_(mean=0.0, std=0.02 / math.sqrt(2 * config.n_layer))

        n_params = sum(p.numel() for p in self.blocks.parameters())
        print("number of parameters: %.2fM" % (n_params / 1e6,))

    def _set_model_config(self, config):
        type_given = config.model_type is not None
        params_given = all([config.n_layer is not None, config.n_head is not None, config.n_embd is not None])
        if type_given and not params_given:
            config.__dict__.update({
                "openai-gpt": dict(n_layer=12, n_head=12, n_embd=768),
                "gpt2": dict(n_layer=12, n_head=12, n_embd=768),
                "gpt2-medium": dict(n_layer=24, n_head=16, n_embd=1024),
                "gpt2-large": dict(n_layer=36, n_head=20, n_embd=1280),
                "gpt2-xl": dict(n_layer=48, n_head=25, n_embd=1600),
                "gopher-44m": dict(n_layer=8, n_head=16, n_embd=512),
                "gpt-mini": dict(n_layer=6, n_head=6, n_embd=192),
                "gpt-micro": dict(n_layer=4, n_head=4, n_embd=128),
                "gpt-nano": dict(n_layer=3, n_head=3, n_embd=48),
            }[config.model_type])
        return config

    def _init_weights(self, module):
        if isinstance(module, (nn.Linear, nn.Embedding)):
            module.weight.data.normal_(mean=0.0, std=0.02)
            if isinstance(module, nn.Linear) and module.bias is not None:
                module.bias.data.zero_()
        elif isinstance(module, nn.LayerNorm):
            module.bias.data.zero_()
            module.weight.data.fill_(1.0)

    def forward(self, idx, targets=None):
        x = self.emb_stem(idx)
        x = self.blocks(x)
        x = self.ln_f(x)
        logits = self.head(x)

        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1), ignore_index=-1)

        return logits, loss

    @zgrad.no_grad()
    def generate(self, idx, max_new_tokens, temperature=1.0, do_sample=False, top_k=None):
        """Extend ``idx`` (b, t) by ``max_new_tokens`` tokens, feeding each prediction back."""
        for _ in range(max_new_tokens):
            idx_cond = idx if idx.size(1) <= self.block_size else idx[:, -self.block_size:]
            logits, _ = self(idx_cond)
            logits = logits[:, -1, :] / temperature
            if top_k is not None:
                v, _ = zgrad.topk(logits, top_k)
                logits[logits < v[:, [-1]]] = -float("Inf")
            probs = F.softmax(logits, dim=-1)
            if do_sample:
                idx_next = zgrad.multinomial(probs, num_samples=1)
            else:
                _, idx_next = zgrad.topk(probs, k=1, dim=-1)
            idx = zgrad.cat((idx, idx_next), dim=1)

        return idx


def create_optimizer(model: zgrad.nn.Module, opt_config: OptimizerConfig):
    """AdamW over two groups: weight decay for Linear and in-projection weights, none for biases,
    norms, embeddings and the position parameter (every parameter checked to be in one)."""
    decay = set()
    no_decay = set()
    whitelist_weight_modules = (zgrad.nn.Linear, )
    blacklist_weight_modules = (zgrad.nn.LayerNorm, zgrad.nn.Embedding)
    for mn, m in model.named_modules():
        for pn, p in m.named_parameters():
            fpn = "%s.%s" % (mn, pn) if mn else pn
            # named_modules and named_parameters recurse: each parameter is met many times, once
            # with the module that holds it
            if pn.endswith("bias"):
                no_decay.add(fpn)
            elif pn.endswith("weight") and isinstance(m, whitelist_weight_modules):
                decay.add(fpn)
            elif pn.endswith("in_proj_weight"):
                decay.add(fpn)
            elif pn.endswith("weight") and isinstance(m, blacklist_weight_modules):
                no_decay.add(fpn)
            elif pn.endswith("pos_emb"):
                no_decay.add(fpn)

    param_dict = {pn: p for pn, p in model.named_parameters()}
    inter_params = decay & no_decay
    union_params = decay | no_decay
    assert len(inter_params) == 0, "parameters %s made it into both decay/no_decay sets!" % (str(inter_params), )
    assert len(param_dict.keys() - union_params) == 0, "parameters %s were not separated into either decay/no_decay set!" \
        % (str(param_dict.keys() - union_params), )

    optim_groups = [
        {"params": [param_dict[pn] for pn in sorted(list(decay))], "weight_decay": opt_config.weight_decay},
        {"params": [param_dict[pn] for pn in sorted(list(no_decay))], "weight_decay": 0.0},
    ]
    optimizer = zgrad.optim.AdamW(optim_groups, lr=opt_config.learning_rate, betas=(0.9, 0.95))
    return optimizer
