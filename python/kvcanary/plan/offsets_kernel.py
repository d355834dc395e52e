"""``launch_plan_offsets_kernel``: the plan's first stage alone."""

from __future__ import annotations

from typing import Any, Final, Optional

from kvcanary import _kvcanary as _C
from kvcanary._launch import define_launcher
from kvcanary.plan._inputs import PAGE_TABLE_AND_SAMPLE_DOC, PAGE_TABLE_AND_SAMPLE_PARAMETERS

__all__ = ["launch_plan_offsets_kernel"]

# SGLang's name for the stage's batch limit (PLAN_BS_BLOCK_SIZE in kvcanary.consts).
_PLAN_BS_BLOCK_SIZE: Final[int] = _C.PLAN_BS_BLOCK_SIZE


launch_plan_offsets_kernel = define_launcher(
    _C.plan_offsets, "launch_plan_offsets_kernel", __name__,
    stream_from="out_verify_offsets_scratch", parameters="""
    req_pool_indices prefix_lens extend_seq_lens req_to_token=None full_to_swa_index_mapping=None
    out_verify_offsets_scratch out_write_offsets out_write_seed_slot_indices out_verify_num_valid
    out_verify_enable out_write_num_valid_reqs swa_window_size=0 verify_capacity:int
    req_to_token_stride0:int=None lut_len:int=None""" + PAGE_TABLE_AND_SAMPLE_PARAMETERS,
    doc="""\
    Per-row verify offsets, verify count and enable flag, write offsets and seeds.

    With ``vlen``, ``wlen`` and the chain seed for each row ``r < bs``::

        scratch[r] = sum(vlen of rows < r); scratch[bs] = T
        out_verify_num_valid, out_verify_enable = (C, 0) if T > C else (T, 1)
        out_write_offsets[r] = sum(wlen of rows < r); out_write_offsets[bs] = sum(wlen)
        out_write_seed_slot_indices[r] = seed(r); out_write_num_valid_reqs = bs

    ``out_write_offsets[bs+1:]`` is not touched (the caller zeroes it). SGLang's limits hold:
    ``bs <= 4096`` and ``len(out_verify_offsets_scratch) >= 4097``. ``req_to_token_stride0`` and
    ``lut_len`` (kvcanary only) pass SGLang's raw-ABI scalars explicitly; by default they are
    ``req_to_token.stride(0)`` and the LUT's length (0 without a LUT). CUDA: enqueued on
    ``stream``, graph-capturable. Invalid arguments raise ``ValueError`` before any write.
    """ + PAGE_TABLE_AND_SAMPLE_DOC,
)
