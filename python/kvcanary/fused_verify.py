"""``launch_canary_fused_verify_kernel`` (a kvcanary addition, not in SGLang): the plan's entries
stage and verify in one launch, so no per-entry plan array is written or read."""

from __future__ import annotations

from typing import Any, Optional

from kvcanary import _kvcanary as _C
from kvcanary._launch import define_launcher
from kvcanary.verify import VerifyOrWriteContext

__all__ = ["launch_canary_fused_verify_kernel"]


launch_canary_fused_verify_kernel = define_launcher(
    _C.fused_verify,
    name="launch_canary_fused_verify_kernel",
    module=__name__,
    stream_from="context.canary_buf",
    parameters="""
    context: VerifyOrWriteContext, req_pool_indices: Any, prefix_lens: Any, req_to_token: Any,
    verify_offsets_scratch: Any, verify_num_valid: Any, verify_enable: Any, verify_capacity: int,
    swa_window_size: int = 0, full_to_swa_index_mapping: Optional[Any] = None,
    req_to_verify_expected_tokens: Optional[Any] = None,
    req_to_verify_expected_tokens_valid_lens: Optional[Any] = None,
    kv_token_id_vs_position_offset: int = 0, check_verify_expected_token: bool = False,
    paired_context: Optional[VerifyOrWriteContext] = None,
    req_to_token_stride0: Optional[int] = None""",
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
    CUDA tensors enqueue on ``stream`` (default: torch's current stream for torch tensors), nothing
    synchronises, so the launch may be captured in a CUDA graph. Invalid arguments raise
    ``ValueError`` before anything is written.
    """,
)
