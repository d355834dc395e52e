"""``launch_canary_fused_verify_kernel`` (a kvcanary addition, not in SGLang): the plan's entries
stage and verify in one launch, so no per-entry plan array is written or read."""

from __future__ import annotations

from typing import Any, Optional

from kvcanary import _kvcanary as _C
from kvcanary._launch import define_launcher
from kvcanary.plan._inputs import PAGE_TABLE_AND_SAMPLE_DOC, PAGE_TABLE_AND_SAMPLE_PARAMETERS
from kvcanary.verify import VerifyOrWriteContext, VerifyPlan

__all__ = ["launch_canary_fused_verify_kernel"]


launch_canary_fused_verify_kernel = define_launcher(
    _C.fused_verify, "launch_canary_fused_verify_kernel", __name__,
    stream_from="context.canary_buf", parameters="""
    context:VerifyOrWriteContext req_pool_indices prefix_lens req_to_token=None
    verify_offsets_scratch verify_num_valid verify_enable verify_capacity:int swa_window_size=0
    full_to_swa_index_mapping=None req_to_verify_expected_tokens=None
    req_to_verify_expected_tokens_valid_lens=None kv_token_id_vs_position_offset=0
    check_verify_expected_token=False paired_context:VerifyOrWriteContext=None
    req_to_token_stride0:int=None stored_entries:VerifyPlan=None"""
    + PAGE_TABLE_AND_SAMPLE_PARAMETERS,
    doc="""\
    Checks exactly what ``launch_plan_entries_kernel`` + ``launch_canary_verify_kernel`` check,
    deriving each entry from the plan inputs instead of reading plan arrays::

        kernel_run_counter += 1
        if verify_enable[0] == 0: return
        n = clamp(verify_num_valid[0], 0, verify_capacity), 0 when bs == 0
        slot_run_counter += n
        for e in range(n):
            r = the last row with verify_offsets_scratch[r] <= e
            pos = ws(prefix_lens[r]) + e - verify_offsets_scratch[r]
            check the entry the plan would store for (r, pos), as verify does

    ``verify_offsets_scratch``, ``verify_num_valid`` and ``verify_enable`` are what
    ``launch_plan_offsets_kernel`` (or the plan with ``verify_capacity``) wrote for these inputs.
    ``stored_entries`` (a ``VerifyPlan`` whose four entry arrays a ``launch_plan_entries_kernel``
    of the same inputs filled; its counts are not read): when the launch's ``n`` entries fit its
    arrays, they are read from there as ``launch_canary_verify_kernel`` reads a plan's, instead of
    derived; a launch with more entries derives them. ``launch_canary_fused_stage`` fills them in
    a forward's HEAD, so both of its verifies read them.
    CUDA tensors enqueue on ``stream`` (default: torch's current stream for torch tensors), nothing
    synchronises, so the launch may be captured in a CUDA graph. Invalid arguments raise
    ``ValueError`` before anything is written.
    """ + PAGE_TABLE_AND_SAMPLE_DOC,
)
