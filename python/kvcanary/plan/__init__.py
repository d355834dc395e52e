"""The plan operation. Mirrors ``sglang.kernels.ops.kv_canary.plan``:
``launch_canary_plan_kernels`` here, the two stages in ``offsets_kernel`` and ``entries_kernel``,
and kvcanary's additions: SWA slot translation in ``swa_translate``, sampled verify's rotation in
``advance_phase``."""

from kvcanary.plan.advance_phase import launch_advance_verify_phase_kernel
from kvcanary.plan.api import launch_canary_plan_kernels
from kvcanary.plan.entries_kernel import launch_plan_entries_kernel
from kvcanary.plan.offsets_kernel import launch_plan_offsets_kernel
from kvcanary.plan.swa_translate import launch_swa_translate_kernel

__all__ = [
    "launch_advance_verify_phase_kernel",
    "launch_canary_plan_kernels",
    "launch_plan_entries_kernel",
    "launch_plan_offsets_kernel",
    "launch_swa_translate_kernel",
]
