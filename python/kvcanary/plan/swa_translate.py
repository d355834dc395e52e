"""``launch_swa_translate_kernel`` (kvcanary): the full-to-SWA slot gather."""

from __future__ import annotations

from typing import Any

from kvcanary import _kvcanary as _C
from kvcanary._launch import define_launcher

__all__ = ["launch_swa_translate_kernel"]


launch_swa_translate_kernel = define_launcher(
    _C.swa_translate, "launch_swa_translate_kernel", __name__,
    stream_from="out_slot_indices", parameters="""
    slot_indices full_to_swa_index_mapping out_slot_indices""",
    doc="""\
    Translates full-pool slots into an SWA group's slots (what a caller does to
    ``out_cache_loc`` before an SWA write)::

        for i in range(n): out_slot_indices[i] = x if (x := slot_indices[i]) < 0
                                                 else LUT[min(x, len(LUT) - 1)]

    int64 1-D contiguous tensors of equal length on one device; in place allowed
    (``out_slot_indices is slot_indices``). An out-of-range index clamps to the LUT's last entry.
    CUDA: enqueued on ``stream`` (default: torch's current stream), graph-capturable.
    """,
)
