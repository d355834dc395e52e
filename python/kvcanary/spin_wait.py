"""The spin-wait operation: the timing-jitter fuzzer's delay (kvcanary.runtime's
``jitter_enabled``). Mirrors SGLang kv-canary's spin-wait launcher.
"""

from __future__ import annotations

from typing import Any

from kvcanary import _kvcanary as _C
from kvcanary._launch import define_launcher

__all__ = ["launch_spin_wait_kernel"]


launch_spin_wait_kernel = define_launcher(
    _C.spin_wait, "launch_spin_wait_kernel", __name__,
    stream_from="cycles", parameters="cycles",
    doc="""\
    Spins one GPU thread for ``cycles[0]`` device clock ticks, in stream order.

    ``cycles`` int64 ``[1]``, contiguous. The kernel reads ``cycles[0]`` when it runs, not when
    it is launched, so a launch captured in a CUDA graph spins for whatever the tensor holds at
    each replay::

        ticks = cycles[0]
        if ticks <= 0: return
        spin until clock64() - start >= min(ticks, 100_000_000)
                or 200 ms of wall-clock time (%globaltimer) have passed

    The bound (at least ~50 ms at the peak clock of current GPUs, longer at lower clocks, and
    never beyond the 200 ms wall-clock limit) keeps any value from hanging the stream. On a CPU
    tensor the launcher validates and returns: the CPU backend is a no-op. Errors raise
    ``ValueError`` with ``kv-canary: jitter: cycles must be int64, got {dtype}``, ``... must live
    on CUDA, got {device}``, ``... must be contiguous`` or ``... must have shape [1], got
    {shape}``, checked in that order. CUDA: enqueued on ``stream`` (default: torch's current
    stream for torch tensors), graph-capturable.
    """,
)
