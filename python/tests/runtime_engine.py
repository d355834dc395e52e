"""A small engine the kvcanary.runtime tests drive: torch tensors on one device, a req_to_token
table (row 0 = padding), full-attention KV layers (one, or ``layers`` given to the runtime as
k_layers / v_layers) of any layout, and a scheduler that admits requests, prefills their prompts
and decodes one token a step. ``DEVICES`` parametrizes a test over the CPU and CUDA (skipped
without a GPU or kvcanary's CUDA backend).

Layouts of the real-KV layer (``layout``):
  "rows":  K and V each [slots, heads, head_dim] (page_size 1)
  "vllm":  one tensor [2, blocks, block_size, heads, head_dim]; K = kv[0], V = kv[1]
Tables (``table``):
  "tokens": req_to_token [rows, context] int32, one slot per position, slots handed out in order
  "blocks": a paged block_table [rows, context / block_size] int32; each request takes a new block
            when its positions cross a block boundary (block 0 holds the padding slot 0)
"""

from __future__ import annotations

import pytest
from conftest import HAVE_CUDA

from kvcanary import runtime as kvr

torch = pytest.importorskip("torch")  # the runtime tests drive torch tensors; skipped without

HEADS, HEAD_DIM = 2, 8  # bfloat16: 32 bytes a token
DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.skipif(
    not HAVE_CUDA, reason="needs a GPU and kvcanary's CUDA backend"))]


class Engine:
    def __init__(self, device="cpu", slots=256, rows=4, context=64, layout="rows", block_size=4,
                 prompt=6, table="tokens", layers=1):
        self.device = torch.device(device)
        self.slots, self.rows, self.context, self.prompt = slots, rows, context, prompt
        self.block_size = block_size if layout == "vllm" else 1
        self.table_block = block_size if table == "blocks" else None
        self.block_table = None
        if self.table_block:
            self.block_table = torch.zeros(rows, context // block_size, dtype=torch.int32,
                                           device=self.device)
            self.next_block = 1
        bf16 = dict(dtype=torch.bfloat16, device=self.device)
        self.k_layers, self.v_layers = [], []
        for _ in range(layers):
            if layout == "vllm":
                kv = torch.zeros(2, slots // block_size, block_size, HEADS, HEAD_DIM, **bf16)
                self.k_layers.append(kv[0])
                self.v_layers.append(kv[1])
            else:
                self.k_layers.append(torch.zeros(slots, HEADS, HEAD_DIM, **bf16))
                self.v_layers.append(torch.zeros(slots, HEADS, HEAD_DIM, **bf16))
        self.k, self.v = self.k_layers[0], self.v_layers[0]
        self.req_to_token = torch.zeros(rows, context, dtype=torch.int32, device=self.device)
        self.lengths = [0] * rows
        self.next_slot = 1
        self.last_batch = None

    def group(self, **overrides):
        fields = dict(kind="full", num_slots=self.slots, k_layer0=self.k, v_layer0=self.v,
                      page_size=self.block_size)
        if len(self.k_layers) > 1:
            fields.update(k_layer0=None, v_layer0=None, k_layers=self.k_layers,
                          v_layers=self.v_layers)
        fields.update(overrides)
        return kvr.GroupSpec(**fields)

    def install(self, config, **overrides):
        fields = dict(groups=[self.group()], pool_slot_count=self.slots, max_prefill_tokens=64)
        if self.table_block:
            fields.update(block_table=self.block_table, block_size=self.table_block)
        else:
            fields.update(req_to_token=self.req_to_token)
        fields.update(overrides)
        return kvr.install(config, **fields)

    def slot_of(self, row, position):
        if self.table_block:
            block = int(self.block_table[row, position // self.table_block])
            return block * self.table_block + position % self.table_block
        return int(self.req_to_token[row, position])

    def place(self, tokens):
        """Gives each new (row, position) its slot; returns the slots."""
        if not self.table_block:
            slots = list(range(self.next_slot, self.next_slot + len(tokens)))
            self.next_slot += len(tokens)
            for (row, p), slot in zip(tokens, slots):
                self.req_to_token[row, p] = slot
            return slots
        for row, p in tokens:
            if p % self.table_block == 0:
                self.block_table[row, p // self.table_block] = self.next_block
                self.next_block += 1
        return [self.slot_of(row, p) for row, p in tokens]

    def block_ids(self, spans):
        """Each row's block ids of its positions [0, end), concatenated in row order."""
        ids = []
        for row, _, end in spans:
            ids += self.block_table[row, :-(-end // self.table_block)].tolist()
        return ids

    @staticmethod
    def token(row, position):
        return 100 * row + position + 1

    def schedule(self):
        """Rows 1.. prefill their prompt on their first step, then decode one token a step."""
        columns, host = self.schedule_columns()
        return self.forward_batch(columns), host

    @staticmethod
    def forward_batch(columns):
        """A ForwardBatch over `columns` (the int64 device tensors schedule_columns returns)."""
        return kvr.ForwardBatch(batch_size=len(columns["req_pool_indices"]),
                                num_tokens=len(columns["input_ids"]), **columns)

    def schedule_columns(self):
        """schedule's batch as a dict of its device tensors by ForwardBatch field."""
        spans = []  # (row, first new position, end)
        for row in range(1, self.rows):
            begin = self.lengths[row]
            self.lengths[row] = self.prompt if begin == 0 else begin + 1
            spans.append((row, begin, self.lengths[row]))
        tokens = [(row, p) for row, begin, end in spans for p in range(begin, end)]
        slots = self.place(tokens)
        ids = [self.token(row, p) for row, p in tokens]
        positions = [p for _, p in tokens]
        rows = [row for row, _, _ in spans]
        prefix = [begin for _, begin, _ in spans]
        extend = [end - begin for _, begin, end in spans]
        as_tensor = lambda values: torch.tensor(values, dtype=torch.int64, device=self.device)
        columns = dict(req_pool_indices=as_tensor(rows), prefix_lens=as_tensor(prefix),
                       extend_seq_lens=as_tensor(extend), input_ids=as_tensor(ids),
                       positions=as_tensor(positions), out_cache_loc=as_tensor(slots))
        host = kvr.ForwardHostInput(req_pool_indices=rows, prefix_lens=prefix,
                                    extend_seq_lens=extend)
        if self.table_block:
            host.block_ids = self.block_ids(spans)
        self.last_batch = (ids, slots)
        return columns, host

    def write_kv(self, ids=None, slots=None):
        """The model: the KV bytes of the last scheduled forward's tokens in every layer, or of the
        tokens `ids` into `slots` (int64 tensors on the device: no host value is read, so a CUDA
        graph can capture it)."""
        if ids is None:
            ids, slots = (torch.tensor(values, dtype=torch.int64, device=self.device)
                          for values in self.last_batch)
        for layer, (k, v) in enumerate(zip([self.k] + self.k_layers[1:],
                                           [self.v] + self.v_layers[1:])):
            values = ids + 7 * layer  # each layer's bytes differ
            k_values = (values % 97).to(torch.bfloat16)
            v_values = (values % 89).to(torch.bfloat16) + 0.5
            for half, half_values in ((k, k_values), (v, v_values)):
                per_token = half_values[:, None, None].expand(-1, HEADS, HEAD_DIM)
                half.view(-1, HEADS, HEAD_DIM).index_copy_(0, slots, per_token)

    def kv_of(self, layer, slot):
        """One slot's [heads, head_dim] in a layer of this engine's layout."""
        if self.block_size == 1:
            return layer[slot]
        return layer[slot // self.block_size, slot % self.block_size]

    def step(self, canary):
        """One whole step; returns the ForwardBatch it described."""
        batch, host = self.schedule()
        self.run_step(canary, batch, host)
        return batch

    def run_step(self, canary, batch, host):
        """The four phases around the model's KV write of a scheduled batch."""
        canary.begin_step([batch], [host])
        canary.pre_forward(0)
        self.write_kv()
        canary.post_forward(0)
        canary.end_step()

    def corrupt_record(self, canary, row, position):
        """Flips the token of (row, position)'s TAIL K record; returns that slot and the next one,
        the slots a verify reports."""
        slot = self.slot_of(row, position)
        records = canary.canary_buffer("full", True, False).view(torch.int64)
        records[slot, 0] ^= 1  # the token field
        return {slot, self.slot_of(row, position + 1)}
