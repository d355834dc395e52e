"""Continuous batching over the paged KV cache.

Every step the scheduler admits arrived requests (sharing cached prefix blocks), then builds one
forward: a decode token for every running request past its prompt, then prefill chunks up to the
token budget. It allocates the blocks the forward writes, computes the slot mapping from each
request's blocks, and keeps the block table (a host copy and the device tensor the model and
kvcanary read) in step. After the forward it appends the sampled tokens, caches newly full
blocks, and frees the blocks of finished requests.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from .block_pool import BlockPool, block_keys
from .workload import Request


@dataclass(frozen=True)
class EngineConfig:
    num_blocks: int = 40          # block 0 is padding: 39 usable blocks
    block_size: int = 16
    max_running: int = 8
    max_blocks_per_req: int = 8   # 128 tokens
    token_budget: int = 48        # tokens per forward (decodes + prefill chunks)


@dataclass
class ForwardPlan:
    """One forward on the host: its rows and, per new token, id, position and slot."""

    rows: list[tuple[Request, int, int]] = field(default_factory=list)  # (req, prefix, extend)
    input_ids: list[int] = field(default_factory=list)
    positions: list[int] = field(default_factory=list)
    slot_mapping: list[int] = field(default_factory=list)
    samplers: list[tuple[Request, int]] = field(default_factory=list)   # (req, token index)
    new_blocks: list[tuple[int, int]] = field(default_factory=list)     # (row, table entry)

    def first_token(self, row: int) -> int:
        """Index of row ``row``'s first new token in the flat token lists."""
        return sum(extend for _, _, extend in self.rows[:row])

    def block_ids(self, block_size: int) -> list[int]:
        """Each row's blocks covering positions [0, prefix + extend), in row order."""
        ids = []
        for req, prefix, extend in self.rows:
            ids += req.blocks[:-(-(prefix + extend) // block_size)]
        return ids


class Scheduler:
    def __init__(self, config: EngineConfig, requests: list[Request], device: torch.device):
        self.config = config
        self.pool = BlockPool(config.num_blocks, config.block_size)
        self.pending = list(requests)          # not yet arrived or not yet admitted, in order
        self.running: list[Request] = []
        self.finished: list[Request] = []
        self.free_rows = list(range(config.max_running, 0, -1))  # row 0 is padding
        shape = (config.max_running + 1, config.max_blocks_per_req)
        self.table_host = torch.zeros(shape, dtype=torch.int32)
        self.block_table = torch.zeros(shape, dtype=torch.int32, device=device)

    def slot(self, req: Request, position: int) -> int:
        size = self.config.block_size
        return req.blocks[position // size] * size + position % size

    def done(self) -> bool:
        return not self.pending and not self.running

    # Admission -----------------------------------------------------------------------------

    def admit(self, step: int) -> None:
        while (self.pending and self.pending[0].arrival <= step and self.free_rows
               and self._try_admit(self.pending[0], step)):
            self.running.append(self.pending.pop(0))

    def _blocks_needed(self, req: Request) -> int:
        return -(-(len(req.prompt) + req.max_new) // self.config.block_size)

    def _try_admit(self, req: Request, step: int) -> bool:
        size = self.config.block_size
        keys = block_keys(req.prompt, size, (len(req.prompt) - 1) // size)  # keep 1 to compute
        hits = []
        for key in keys:
            block = self.pool.lookup(key)
            if block is None:
                break
            hits.append(block)
        reserved = sum(self._blocks_needed(r) - len(r.blocks) for r in self.running)
        leaving_lru = sum(1 for b in hits if self.pool.ref_count[b] == 0)
        if self.pool.available() - leaving_lru - reserved < self._blocks_needed(req) - len(hits):
            return False
        for block in hits:
            self.pool.acquire_cached(block)
        req.blocks, req.computed, req.registered = hits, len(hits) * size, len(hits)
        req.row = self.free_rows.pop()
        self.table_host[req.row] = 0
        self.table_host[req.row, :len(hits)] = torch.tensor(hits, dtype=torch.int32)
        return True

    # The forward ---------------------------------------------------------------------------

    def plan_forward(self) -> ForwardPlan:
        plan, budget = ForwardPlan(), self.config.token_budget
        for req in sorted(self.running, key=lambda r: r.prefilling):  # decodes first
            extend = 1 if not req.prefilling else min(len(req.prompt) - req.computed, budget)
            if extend == 0 or budget < extend:
                continue
            budget -= extend
            self._add_row(plan, req, extend)
        return plan

    def _add_row(self, plan: ForwardPlan, req: Request, extend: int) -> None:
        prefix = req.computed
        while len(req.blocks) * self.config.block_size < prefix + extend:
            block = self.pool.allocate()
            self.table_host[req.row, len(req.blocks)] = block
            plan.new_blocks.append((len(plan.rows), len(req.blocks)))
            req.blocks.append(block)
        plan.rows.append((req, prefix, extend))
        tokens = req.tokens
        for position in range(prefix, prefix + extend):
            plan.input_ids.append(tokens[position])
            plan.positions.append(position)
            plan.slot_mapping.append(self.slot(req, position))
        if prefix + extend == len(tokens):  # the row's last token is the newest: sample it
            plan.samplers.append((req, len(plan.input_ids) - 1))

    def commit_table(self, plan: ForwardPlan) -> None:
        """Copies the batch's block-table rows to the device, as the forward will read them."""
        rows = torch.tensor([req.row for req, _, _ in plan.rows], dtype=torch.int64)
        self.block_table[rows.to(self.block_table.device)] = \
            self.table_host[rows].to(self.block_table.device)

    def apply(self, plan: ForwardPlan, sampled: list[int], step: int) -> None:
        for req, prefix, extend in plan.rows:
            req.computed = prefix + extend
        for (req, _), token in zip(plan.samplers, sampled):
            req.output.append(token)
        for req in list(self.running):
            self._cache_full_blocks(req, step)
            if req.remaining == 0:
                self.release(req)

    def _cache_full_blocks(self, req: Request, step: int) -> None:
        full = req.computed // self.config.block_size
        if full <= req.registered:
            return
        keys = block_keys(req.tokens, self.config.block_size, full)
        for index in range(req.registered, full):
            self.pool.register(req.blocks[index], keys[index], step)
        req.registered = full

    def release(self, req: Request, keep: frozenset = frozenset()) -> None:
        """Finishes (or aborts) ``req``: frees its row and releases its blocks but ``keep``."""
        for block in req.blocks:
            if block not in keep:
                self.pool.release(block)
        self.running.remove(req)
        self.finished.append(req)
        self.table_host[req.row] = 0
        self.block_table[req.row] = 0
        self.free_rows.append(req.row)
        req.row = 0
