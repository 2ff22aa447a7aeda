"""Real models for the truth tests, built without downloads.

GPT-2 comes from ``transformers`` with a small ``GPT2Config`` and random
weights; the CNN (ResNet-18's layout at a small width) and the transformer
block are written here (no torchvision, no timm).
"""

from __future__ import annotations

import torch
from torch import nn

#: Source run in a test shell to define the models there (so that frames
#: compiled in a cell have the cell's file name, as in a notebook).
SETUP = """
import torch
from torch import nn
import models
"""


class BasicBlock(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int = 1) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.relu = nn.ReLU(inplace=True)
        self.down = None
        if stride != 1 or cin != cout:
            self.down = nn.Sequential(
                nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout)
            )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        identity = x if self.down is None else self.down(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return self.relu(out + identity)


class ResNet18(nn.Module):
    """ResNet-18's layout (4 stages of 2 basic blocks) at a small width."""

    def __init__(self, width: int = 8, classes: int = 10) -> None:
        super().__init__()
        self.stem = nn.Sequential(
            nn.Conv2d(3, width, 3, 1, 1, bias=False), nn.BatchNorm2d(width), nn.ReLU(inplace=True)
        )
        layers, cin = [], width
        for i, mult in enumerate((1, 2, 4, 8)):
            cout = width * mult
            layers += [BasicBlock(cin, cout, 1 if i == 0 else 2), BasicBlock(cout, cout)]
            cin = cout
        self.layers = nn.Sequential(*layers)
        self.head = nn.Linear(cin, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.layers(self.stem(x))
        return self.head(x.mean((2, 3)))


class TransformerBlock(nn.Module):
    """A pre-norm ViT-style encoder block."""

    def __init__(self, dim: int = 64, heads: int = 4) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(dim)
        self.attn = nn.MultiheadAttention(dim, heads, batch_first=True)
        self.norm2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.norm1(x)
        x = x + self.attn(h, h, h, need_weights=False)[0]
        return x + self.mlp(self.norm2(x))


class Chatty(nn.Module):
    """A module that prints, calls ``.item()`` and branches on a tensor."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.lin(x)
        print("chatty", end="")
        v = y.sum().item()
        if y.sum() > 0:
            y = y * 2
        else:
            y = y - 1
        return y * v


def gpt2(layers: int = 2, dim: int = 64, vocab: int = 256, seed: int = 0) -> nn.Module:
    """A small GPT-2 language model from a config (random weights, no download)."""
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(seed)
    cfg = GPT2Config(
        n_layer=layers,
        n_head=2,
        n_embd=dim,
        vocab_size=vocab,
        n_positions=64,
        bos_token_id=0,
        eos_token_id=0,
    )
    return GPT2LMHeadModel(cfg).eval()


def bert(layers: int = 2, dim: int = 64, vocab: int = 256, seed: int = 0) -> nn.Module:
    """A small BERT encoder from a config (random weights, no download)."""
    from transformers import BertConfig, BertModel

    torch.manual_seed(seed)
    cfg = BertConfig(
        num_hidden_layers=layers,
        hidden_size=dim,
        num_attention_heads=2,
        intermediate_size=2 * dim,
        vocab_size=vocab,
        max_position_embeddings=64,
    )
    return BertModel(cfg).eval()


def generate(model: nn.Module, ids: torch.Tensor, steps: int, cache: bool = False) -> torch.Tensor:
    """Greedy decoding, one model call per new token (``steps`` calls).

    Without a KV cache each call sees the whole, growing sequence; with one,
    the first call sees the prompt and later calls one token each.
    """
    import inspect

    base = getattr(model, "_orig_mod", model)
    # transformers 5 renamed past_key_values to cache
    key = "cache" if "cache" in inspect.signature(base.forward).parameters else "past_key_values"
    past = None
    with torch.no_grad():
        for _ in range(steps):
            if cache:
                inp = ids if past is None else ids[:, -1:]
                out = model(inp, use_cache=True, **{key: past})
                past = getattr(out, key, None) or out.past_key_values
            else:
                out = model(ids, use_cache=False)
            ids = torch.cat([ids, out.logits[:, -1:].argmax(-1)], dim=1)
    return ids
