"""kvcanary: KV-cache corruption detection, with SGLang's kernel-layer launchers.

``import kvcanary`` in place of ``sglang.kernels.ops.kv_canary``: the same launchers, keyword
arguments, plan and context classes, enums and ``ValueError`` messages, run
by kvcanary's C++ library. Tensors are any DLPack objects (torch CPU/CUDA tensors, numpy
arrays); CPU tensors run the CPU backend, CUDA tensors the CUDA backend on their device and on
torch's current stream unless ``stream=`` says otherwise. Launchers never synchronise.

Submodules mirror SGLang's: ``kvcanary.consts``, ``kvcanary.verify``, ``kvcanary.write``,
``kvcanary.plan``, ``kvcanary.scatter_req_token_ids``, ``kvcanary.spin_wait`` (the timing-jitter
fuzzer's delay); ``kvcanary.report`` formats violations;
``kvcanary.runtime`` is the host runtime (install, the step protocol, stats) over the C++ one.
"""

from kvcanary import _kvcanary
__version__ = _kvcanary.__version__  # the CMake project version (include/kvcanary/version.h)
from kvcanary.consts import (
    CANARY_CHAIN_ANCHOR,
    CANARY_FIELD_POSITION,
    CANARY_FIELD_PREV_HASH,
    CANARY_FIELD_REAL_KV_HASH,
    CANARY_FIELD_TOKEN,
    CANARY_FIELDS_PER_SLOT,
    CANARY_SLOT_BYTES,
    MAX_REAL_KV_SOURCES,
    PLAN_BS_BLOCK_SIZE,
    REAL_KV_SOURCE_FIELD_NUM_BYTES_PER_TOKEN,
    REAL_KV_SOURCE_FIELD_PAGE_SIZE,
    REAL_KV_SOURCE_FIELD_READ_BYTES,
    REAL_KV_SOURCE_FIELDS_PER_ENTRY,
    REQ_POOL_IDX_PADDING,
    SPLITMIX64_MULTIPLIER_1,
    SPLITMIX64_MULTIPLIER_2,
    TOKEN_TO_KV_SLOT_PADDING,
    VIOLATION_FIELD_EXPECTED_AUX,
    VIOLATION_FIELD_EXPECTED_TOKEN,
    VIOLATION_FIELD_FAIL_REASON_BITS,
    VIOLATION_FIELD_KERNEL_KIND,
    VIOLATION_FIELD_POSITION,
    VIOLATION_FIELD_SLOT_IDX,
    VIOLATION_FIELD_STORED_CHAIN_HASH,
    VIOLATION_FIELD_STORED_TOKEN,
    VIOLATION_FIELDS,
    CanaryLaunchTag,
    FailReason,
    RealKvHashMode,
    splitmix64,
    splitmix64_mix3,
    to_signed_int64,
)
from kvcanary.plan import (
    launch_advance_verify_phase_kernel,
    launch_canary_plan_kernels,
    launch_plan_entries_kernel,
    launch_plan_offsets_kernel,
    launch_swa_translate_kernel,
)
from kvcanary.report import format_violation
from kvcanary.scatter_req_token_ids import launch_scatter_req_token_ids_kernel
from kvcanary.spin_wait import launch_spin_wait_kernel
from kvcanary.verify import (
    RealKvSource,
    VerifyOrWriteContext,
    VerifyPlan,
    compute_slot_hash,
    launch_canary_verify_kernel,
    real_kv_hash,
)
from kvcanary.write import WritePlan, launch_canary_write_kernel
from kvcanary.fused_verify import launch_canary_fused_verify_kernel
from kvcanary.fused_stage import launch_canary_fused_stage

# Raised for type problems (a non-tensor, a missing field, an int given as a str, float or bool, a
# flag that is not a bool) and the scatter op's dtype errors: both a ValueError and a TypeError.
KvCanaryTypeError = _kvcanary.KvCanaryTypeError

# Raised by kvcanary.runtime's end_step in mode raise: a RuntimeError whose .rows holds the
# violations (kvcanary.runtime.Violation) and whose message is the reporter's text.
CorruptionError = _kvcanary.CorruptionError

__all__ = [
    "CANARY_CHAIN_ANCHOR",
    "CANARY_FIELD_POSITION",
    "CANARY_FIELD_PREV_HASH",
    "CANARY_FIELD_REAL_KV_HASH",
    "CANARY_FIELD_TOKEN",
    "CANARY_FIELDS_PER_SLOT",
    "CANARY_SLOT_BYTES",
    "MAX_REAL_KV_SOURCES",
    "PLAN_BS_BLOCK_SIZE",
    "REAL_KV_SOURCE_FIELD_NUM_BYTES_PER_TOKEN",
    "REAL_KV_SOURCE_FIELD_PAGE_SIZE",
    "REAL_KV_SOURCE_FIELD_READ_BYTES",
    "REAL_KV_SOURCE_FIELDS_PER_ENTRY",
    "REQ_POOL_IDX_PADDING",
    "SPLITMIX64_MULTIPLIER_1",
    "SPLITMIX64_MULTIPLIER_2",
    "TOKEN_TO_KV_SLOT_PADDING",
    "VIOLATION_FIELD_EXPECTED_AUX",
    "VIOLATION_FIELD_EXPECTED_TOKEN",
    "VIOLATION_FIELD_FAIL_REASON_BITS",
    "VIOLATION_FIELD_KERNEL_KIND",
    "VIOLATION_FIELD_POSITION",
    "VIOLATION_FIELD_SLOT_IDX",
    "VIOLATION_FIELD_STORED_CHAIN_HASH",
    "VIOLATION_FIELD_STORED_TOKEN",
    "VIOLATION_FIELDS",
    "CanaryLaunchTag",
    "CorruptionError",
    "FailReason",
    "KvCanaryTypeError",
    "RealKvHashMode",
    "RealKvSource",
    "VerifyOrWriteContext",
    "VerifyPlan",
    "WritePlan",
    "compute_slot_hash",
    "format_violation",
    "launch_advance_verify_phase_kernel",
    "launch_canary_plan_kernels",
    "launch_canary_fused_stage",
    "launch_canary_fused_verify_kernel",
    "launch_canary_verify_kernel",
    "launch_canary_write_kernel",
    "launch_plan_entries_kernel",
    "launch_plan_offsets_kernel",
    "launch_scatter_req_token_ids_kernel",
    "launch_spin_wait_kernel",
    "launch_swa_translate_kernel",
    "real_kv_hash",
    "splitmix64",
    "splitmix64_mix3",
    "to_signed_int64",
]
