"""``launch_canary_plan_kernels``: both plan stages in one call."""

from __future__ import annotations

from typing import Any, Optional

from kvcanary import _kvcanary as _C
from kvcanary._launch import define_launcher
from kvcanary.plan._inputs import PAGE_TABLE_AND_SAMPLE_DOC, PAGE_TABLE_AND_SAMPLE_PARAMETERS
from kvcanary.verify import VerifyPlan
from kvcanary.write import WritePlan

__all__ = ["launch_canary_plan_kernels"]


launch_canary_plan_kernels = define_launcher(
    _C.plan, "launch_canary_plan_kernels", __name__,
    stream_from="verify_plan_out.verify_num_valid", parameters="""
    verify_plan_out:VerifyPlan write_plan_out:WritePlan req_pool_indices prefix_lens
    extend_seq_lens req_to_token=None swa_window_size=0 full_to_swa_index_mapping=None
    verify_capacity:int req_to_verify_expected_tokens=None
    req_to_verify_expected_tokens_valid_lens=None kv_token_id_vs_position_offset=0
    verify_offsets_scratch=None req_to_token_stride0:int=None"""
    + PAGE_TABLE_AND_SAMPLE_PARAMETERS,
    doc="""\
    Fills ``verify_plan_out`` and ``write_plan_out`` from a forward's batch.

    Inputs: ``req_pool_indices``, ``prefix_lens``, ``extend_seq_lens`` int64 ``[bs]`` (row 0 =
    padding); ``req_to_token`` int32 ``[rows, width]``, contiguous; ``full_to_swa_index_mapping``
    int64 LUT or None (required when ``swa_window_size > 0``); ``verify_capacity`` must equal
    ``len(verify_plan_out.verify_slot_indices)``; the optional token pool
    ``req_to_verify_expected_tokens`` int32 ``[pool_rows, pool_width]`` with per-batch-row
    ``req_to_verify_expected_tokens_valid_lens`` int64 ``[bs]``. Semantics::

        rt(row, col) = req_to_token[row, col] (row, col clamped); tr(x) = x < 0 ? x : LUT[min(x, len-1)]
        for r in range(bs):
            rp, p, e = req_pool_indices[r], prefix_lens[r], extend_seq_lens[r]; active = rp != 0
            ws = max(p - W, 0) if W > 0 else 0; vlen = max(p - ws, 0) if active else 0
            verify entries, pos in [ws, ws + vlen):
                slot = tr(rt(rp, pos)); prev = tr(rt(rp, pos - 1)) if pos > 0 else -1
                position = pos; token = pool[rp, pos + offset] if inside valid_lens[r] else -1
            write_offsets[r] = sum of max(e, 0) of the active rows before r
            seed[r] = tr(rt(rp, p - 1)) if active and p > 0 and e > 0 else -1
        T = sum(vlen): T > C -> verify_num_valid = C, enable = 0, no entry written
                       else  -> verify_num_valid = T, enable = 1
        write_offsets[bs] = total writes; write_offsets[bs+1:] = 0; write_num_valid_reqs = bs

    kvcanary additions: no ``bs`` limit; ``verify_offsets_scratch`` (int64, ``>= bs + 1``) is a
    workspace so nothing is allocated per call; ``req_to_token_stride0`` (an engine's pitch)
    must equal ``req_to_token.stride(0)``. CUDA: enqueued on ``stream`` (default: torch's current
    stream for torch tensors), no host reads, graph-capturable. Invalid arguments raise
    ``ValueError`` before anything is written.
    """ + PAGE_TABLE_AND_SAMPLE_DOC,
)
