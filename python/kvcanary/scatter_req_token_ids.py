"""The scatter operation: fills the source-of-truth token pool that the
plan's expected-token gather reads. Mirrors ``sglang.kernels.ops.kv_canary.scatter_req_token_ids``.
"""

from __future__ import annotations

from typing import Any

from kvcanary import _kvcanary as _C
from kvcanary._launch import define_launcher

__all__ = ["launch_scatter_req_token_ids_kernel"]


launch_scatter_req_token_ids_kernel = define_launcher(
    _C.scatter_req_token_ids, "launch_scatter_req_token_ids_kernel", __name__,
    stream_from="pool_out", parameters="""
    flat_in offsets req_pool_indices pool_out""",
    doc="""\
    Scatters a flat per-request int64 token sequence into an int32 pool, in place.

    ``flat_in`` int64 ``[total]``, ``offsets`` int64 ``[bs + 1]``, ``req_pool_indices`` int64
    ``[bs]``, ``pool_out`` int32 ``[pool_rows, pool_width]`` (strides honoured)::

        if bs == 0 or total == 0: return
        for r in range(bs):
            rp = req_pool_indices[r]; skip rows outside [0, pool_rows)
            for c in range(min(offsets[r+1] - offsets[r], pool_width)):
                k = offsets[r] + c
                if 0 <= k < total: pool_out[rp, c] = low 32 bits of flat_in[k]

    Columns past the copied length and rows not named keep their contents (stale tails are why
    the plan takes ``valid_lens``). Rank errors raise ``ValueError``, dtype errors a class that
    is both ``ValueError`` and ``TypeError``. CUDA: enqueued on ``stream`` (default: torch's
    current stream for torch tensors), graph-capturable.
    """,
)
