"""A small decoder-only transformer that reads and writes a paged KV cache, vLLM style.

Each layer's cache is one tensor ``[2, num_blocks, block_size, heads, head_dim]`` (K = ``[0]``,
V = ``[1]``). A forward writes the new tokens' K/V through the slot mapping
(``slot = block * block_size + offset``) and attends by gathering each request's positions
through the block table, so a wrong table entry or a wrong slot is read or written exactly as a
real engine would. The weights are seeded random numbers: nothing is downloaded, and the outputs
are deterministic for a seed, which is what the negative control compares.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class ModelConfig:
    vocab: int = 256
    d_model: int = 64
    heads: int = 4
    layers: int = 4
    mlp_ratio: int = 4

    @property
    def head_dim(self) -> int:
        return self.d_model // self.heads


@dataclass
class Forward:
    """One forward as the model sees it: flat new tokens, and each batch row's place in them.

    ``rows[i] = (table_row, prefix_len, extend_len)``: the new tokens of row ``i`` are the next
    ``extend_len`` entries of ``input_ids``, at positions ``prefix_len ..``.
    """

    input_ids: torch.Tensor      # [tokens] int64
    positions: torch.Tensor      # [tokens] int64
    slot_mapping: torch.Tensor   # [tokens] int64, where each new token's K/V is written
    rows: list[tuple[int, int, int]]


def _rms_norm(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * weight


def _rope(x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    """Rotary position embedding of ``x`` [tokens, heads, head_dim] at ``positions``."""
    half = x.shape[-1] // 2
    freqs = 10000.0 ** (-torch.arange(half, device=x.device, dtype=torch.float32) / half)
    angles = positions.to(torch.float32)[:, None] * freqs[None, :]
    cos, sin = angles.cos()[:, None, :], angles.sin()[:, None, :]
    x1, x2 = x[..., :half], x[..., half:]
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)


class TinyDecoder:
    """Seeded random weights; ``forward`` returns the logits of the requested token indices."""

    def __init__(self, config: ModelConfig, seed: int, device: torch.device):
        self.config = config
        gen = torch.Generator().manual_seed(seed)

        def param(*shape: int, scale: float) -> torch.Tensor:
            return (torch.randn(*shape, generator=gen) * scale).to(device)

        d, hidden = config.d_model, config.d_model * config.mlp_ratio
        self.embed = param(config.vocab, d, scale=1.0)
        self.lm_head = param(d, config.vocab, scale=1.0 / math.sqrt(d))
        self.layers = [
            {
                "norm1": torch.ones(d, device=device),
                "wqkv": param(d, 3 * d, scale=2.0 / math.sqrt(d)),
                "wo": param(d, d, scale=1.0 / math.sqrt(d)),
                "norm2": torch.ones(d, device=device),
                "w1": param(d, hidden, scale=1.0 / math.sqrt(d)),
                "w2": param(hidden, d, scale=1.0 / math.sqrt(hidden)),
            }
            for _ in range(config.layers)
        ]
        self.final_norm = torch.ones(d, device=device)

    def new_kv_cache(self, num_blocks: int, block_size: int, device: torch.device):
        """One zeroed ``[2, num_blocks, block_size, heads, head_dim]`` float32 tensor per layer."""
        shape = (2, num_blocks, block_size, self.config.heads, self.config.head_dim)
        return [torch.zeros(shape, dtype=torch.float32, device=device)
                for _ in range(self.config.layers)]

    @torch.no_grad()
    def forward(self, fwd: Forward, kv_caches: list[torch.Tensor], block_table: torch.Tensor,
                logit_indices: list[int]) -> torch.Tensor:
        x = self.embed[fwd.input_ids]
        for layer, kv in zip(self.layers, kv_caches):
            x = x + self._attention(layer, _rms_norm(x, layer["norm1"]), fwd, kv, block_table)
            h = _rms_norm(x, layer["norm2"])
            x = x + torch.nn.functional.silu(h @ layer["w1"]) @ layer["w2"]
        last = _rms_norm(x[logit_indices], self.final_norm)
        return last @ self.lm_head

    def _attention(self, layer: dict, h: torch.Tensor, fwd: Forward, kv: torch.Tensor,
                   block_table: torch.Tensor) -> torch.Tensor:
        heads, head_dim = self.config.heads, self.config.head_dim
        q, k, v = (h @ layer["wqkv"]).view(-1, 3, heads, head_dim).unbind(1)
        q, k = _rope(q, fwd.positions), _rope(k, fwd.positions)
        # The write: every new token's K/V goes to its slot, through the slot mapping only.
        k_slots = kv[0].view(-1, heads, head_dim)
        v_slots = kv[1].view(-1, heads, head_dim)
        k_slots[fwd.slot_mapping] = k
        v_slots[fwd.slot_mapping] = v
        out = torch.empty_like(q)
        start = 0
        for table_row, prefix, extend in fwd.rows:
            context = _context_slots(block_table[table_row], prefix + extend, kv.shape[2])
            out[start:start + extend] = _causal_attention(
                q[start:start + extend], k_slots[context], v_slots[context], prefix)
            start += extend
        return out.reshape(-1, heads * head_dim) @ layer["wo"]


def _context_slots(table_row: torch.Tensor, length: int, block_size: int) -> torch.Tensor:
    """The read: the slot of each position ``0 .. length - 1``, through the block table."""
    positions = torch.arange(length, device=table_row.device)
    blocks = table_row[positions // block_size].to(torch.int64)
    return blocks * block_size + positions % block_size


def _causal_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                      prefix: int) -> torch.Tensor:
    """``q`` [new, heads, dim] at positions ``prefix ..`` over ``k``/``v`` [context, heads, dim]."""
    scores = torch.einsum("qhd,khd->hqk", q, k) / math.sqrt(q.shape[-1])
    query_pos = torch.arange(prefix, prefix + q.shape[0], device=q.device)
    key_pos = torch.arange(k.shape[0], device=q.device)
    scores = scores.masked_fill(key_pos[None, None, :] > query_pos[None, :, None], float("-inf"))
    return torch.einsum("hqk,khd->qhd", scores.softmax(-1), v)
