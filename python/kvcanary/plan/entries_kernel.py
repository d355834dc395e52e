"""``launch_plan_entries_kernel``: the plan's second stage alone."""

from __future__ import annotations

from typing import Any, Optional

from kvcanary import _kvcanary as _C
from kvcanary._launch import define_launcher
from kvcanary.plan._inputs import PAGE_TABLE_AND_SAMPLE_DOC, PAGE_TABLE_AND_SAMPLE_PARAMETERS

__all__ = ["launch_plan_entries_kernel"]


launch_plan_entries_kernel = define_launcher(
    _C.plan_entries, "launch_plan_entries_kernel", __name__,
    stream_from="verify_offsets_scratch", parameters="""
    req_pool_indices prefix_lens req_to_token=None full_to_swa_index_mapping=None
    verify_offsets_scratch verify_enable req_to_verify_expected_tokens=None
    req_to_verify_expected_tokens_valid_lens=None out_verify_slot_indices
    out_verify_expected_tokens out_verify_expected_positions out_verify_prev_slot_indices
    kv_token_id_vs_position_offset=0 swa_window_size=0""" + PAGE_TABLE_AND_SAMPLE_PARAMETERS,
    doc="""\
    Writes the verify entries from the offsets of ``launch_plan_offsets_kernel``::

        total = verify_offsets_scratch[bs]; cap = len(out_verify_slot_indices)
        if total <= 0 or verify_enable[0] == 0: return
        for tid in range(total):                      # total > cap with enable set: error
            r = the last row with scratch[r] <= tid (empty rows never win)
            pos = ws(prefix_lens[r]) + tid - scratch[r]; store the verify entry of (r, pos) at tid

    Padding rows are recognised only through their empty ranges. CUDA: enqueued on ``stream``,
    graph-capturable (an inconsistent total traps on the device). Invalid arguments raise
    ``ValueError`` before anything is written.
    """ + PAGE_TABLE_AND_SAMPLE_DOC,
)
