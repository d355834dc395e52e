"""kvcanary on the engine: installed through ``kvcanary.runtime`` next to the paged KV cache.

The runtime is told the pool's layout once, at install: a block table (``slot = block *
block_size + offset``), the pool's slot count, and every layer's K and V pages as real-KV sources
(``kv[0]`` and ``kv[1]`` of vLLM's per-layer ``[2, num_blocks, block_size, heads, head_dim]``),
so each record's fingerprint covers the bytes of all layers. Then, around every forward:
``begin_step`` with the forward's device tensors and its host description (block ids included),
``pre_forward``, the model, ``post_forward``, ``end_step``. Violations arrive through the listener
one step after the forward that made them; mode ``log`` keeps serving.
"""

from __future__ import annotations

import sys

import torch

from .scheduler import ForwardPlan

REAL_KV_SOURCES_MAX = 4  # layers per group the runtime folds into one fingerprint


class Canary:
    def __init__(self, block_table: torch.Tensor, kv_caches: list[torch.Tensor],
                 block_size: int, token_budget: int, real_data: str, verbose: bool = False):
        from kvcanary import runtime as kvr  # only an engine running the canary needs it

        self._kvr = kvr
        if len(kv_caches) > REAL_KV_SOURCES_MAX:
            raise ValueError(f"at most {REAL_KV_SOURCES_MAX} layers can be fingerprinted")
        _, num_blocks, _, heads, head_dim = kv_caches[0].shape
        slots = num_blocks * block_size
        group = kvr.GroupSpec(
            kind="full", num_slots=slots,
            k_layers=[kv[0] for kv in kv_caches], v_layers=[kv[1] for kv in kv_caches],
            page_size=block_size, bytes_per_token=heads * head_dim * kv_caches[0].element_size())
        # report_untouched_rows: a never-written record read by a verify is shown like any other
        # violation (by default it is only counted), so the attribution sees every row.
        config = kvr.Config(mode="log", real_data=real_data, enable_mha_v=True,
                            report_untouched_rows=True, stats_print_every_n_steps=0)
        self.log_lines: list[tuple[str, str]] = []  # (level, text): the runtime's log
        self._verbose = verbose
        self.runtime = kvr.install(
            config, device=block_table.device, block_table=block_table, block_size=block_size,
            groups=[group], pool_slot_count=slots, max_prefill_tokens=token_budget,
            chunked_prefill_size=token_budget, log=self._log)
        self.runtime.mark_init_finished()  # no CUDA graphs to capture: init is over
        self._new_rows: list = []
        self.runtime.on_violation(lambda row, _step: self._new_rows.append(row))
        self.block_size = block_size
        self.runtime_device = block_table.device

    def _log(self, level: str, text: str) -> None:
        """Keeps the runtime's log lines (one WARNING per violation row) for the report."""
        self.log_lines.append((level, text))
        if self._verbose:
            print(f"[kvcanary] {level} {text}", file=sys.stderr)

    def begin(self, plan: ForwardPlan, input_ids: torch.Tensor, positions: torch.Tensor,
              slot_mapping: torch.Tensor) -> None:
        """Phase 1 and 2: describe the forward (the tensors the model will use), verify, write."""
        device = input_ids.device
        rows = [req.row for req, _, _ in plan.rows]
        prefix_lens = [prefix for _, prefix, _ in plan.rows]
        extend_lens = [extend for _, _, extend in plan.rows]

        def on_device(values: list[int]) -> torch.Tensor:
            return torch.tensor(values, dtype=torch.int64, device=device)

        batch = self._kvr.ForwardBatch(
            batch_size=len(rows), num_tokens=len(plan.input_ids),
            req_pool_indices=on_device(rows), prefix_lens=on_device(prefix_lens),
            extend_seq_lens=on_device(extend_lens), input_ids=input_ids, positions=positions,
            out_cache_loc=slot_mapping)
        host = self._kvr.ForwardHostInput(
            req_pool_indices=rows, prefix_lens=prefix_lens, extend_seq_lens=extend_lens,
            block_ids=plan.block_ids(self.block_size))
        self.runtime.begin_step([batch], [host])
        self.runtime.pre_forward(0)

    def drain(self) -> list:
        """An empty step after the last forward: its end_step reports that forward's rows."""
        empty = torch.zeros(1, dtype=torch.int64, device=self.runtime_device)  # [>= 0] each
        batch = self._kvr.ForwardBatch(
            batch_size=0, num_tokens=0, req_pool_indices=empty, prefix_lens=empty,
            extend_seq_lens=empty, input_ids=empty, positions=empty, out_cache_loc=empty)
        host = self._kvr.ForwardHostInput(req_pool_indices=[], prefix_lens=[], extend_seq_lens=[],
                                          block_ids=[])
        self.runtime.begin_step([batch], [host])
        self.runtime.pre_forward(0)
        return self.end()

    def end(self) -> list:
        """Phase 3 and 4 after the model ran; returns the violation rows reported this step."""
        self.runtime.post_forward(0)
        self.runtime.end_step()
        rows, self._new_rows = self._new_rows, []
        return rows

    def stats(self) -> dict:
        return self.runtime.stats()
