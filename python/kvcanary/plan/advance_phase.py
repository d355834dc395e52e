"""``launch_advance_verify_phase_kernel`` (a kvcanary addition): sampled verify's rotation."""

from __future__ import annotations

from typing import Any, Optional

from kvcanary import _kvcanary as _C
from kvcanary._launch import define_launcher

__all__ = ["launch_advance_verify_phase_kernel"]


launch_advance_verify_phase_kernel = define_launcher(
    _C.advance_verify_phase, "launch_advance_verify_phase_kernel", __name__,
    stream_from="verify_phase", parameters="verify_phase req_pool_indices=None",
    doc="""\
    Advances the phases of sampled verify (``verify_sample > 1`` in the plan launchers) by one
    forward::

        n = len(verify_phase)
        if req_pool_indices is None: verify_phase[:] += 1
        else: for rp in req_pool_indices: if rp != 0: verify_phase[clamp(rp, 0, n - 1)] += 1

    ``verify_phase`` int64 ``[n >= 1]``, read and written (wrapping adds); ``req_pool_indices``
    int64 ``[bs]``, the forward's rows (rows sharing an entry each add 1). Run it once per
    forward, after its last verify: K forwards of a request then see K consecutive phases and
    together verify every position of its prefix. CUDA: one launch on ``stream``, no host reads,
    graph-capturable. Invalid arguments raise ``ValueError`` before anything is written.
    """,
)
