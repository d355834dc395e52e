"""Constants, enumerations and hashes of the canary format.

Mirrors ``sglang.kernels.ops.kv_canary.consts``. Every value is read from the C++ extension (whose
single source is ``include/kvcanary/format.h``); none is retyped here.
"""

from __future__ import annotations

from enum import IntEnum, IntFlag
from typing import Final

from kvcanary import _kvcanary as _C

__all__ = [
    "CANARY_CHAIN_ANCHOR",
    "REQ_POOL_IDX_PADDING",
    "TOKEN_TO_KV_SLOT_PADDING",
    "CANARY_FIELDS_PER_SLOT",
    "CANARY_FIELD_TOKEN",
    "CANARY_FIELD_POSITION",
    "CANARY_FIELD_PREV_HASH",
    "CANARY_FIELD_REAL_KV_HASH",
    "CANARY_SLOT_BYTES",
    "VIOLATION_FIELDS",
    "VIOLATION_FIELD_KERNEL_KIND",
    "VIOLATION_FIELD_SLOT_IDX",
    "VIOLATION_FIELD_POSITION",
    "VIOLATION_FIELD_STORED_TOKEN",
    "VIOLATION_FIELD_EXPECTED_TOKEN",
    "VIOLATION_FIELD_STORED_CHAIN_HASH",
    "VIOLATION_FIELD_EXPECTED_AUX",
    "VIOLATION_FIELD_FAIL_REASON_BITS",
    "MAX_REAL_KV_SOURCES",
    "REAL_KV_SOURCE_FIELDS_PER_ENTRY",
    "REAL_KV_SOURCE_FIELD_PAGE_SIZE",
    "REAL_KV_SOURCE_FIELD_NUM_BYTES_PER_TOKEN",
    "REAL_KV_SOURCE_FIELD_READ_BYTES",
    "PLAN_BS_BLOCK_SIZE",
    "SPLITMIX64_MULTIPLIER_1",
    "SPLITMIX64_MULTIPLIER_2",
    "FailReason",
    "RealKvHashMode",
    "CanaryLaunchTag",
    "splitmix64",
    "splitmix64_mix3",
    "to_signed_int64",
]

CANARY_CHAIN_ANCHOR: Final[int] = _C.CANARY_CHAIN_ANCHOR
REQ_POOL_IDX_PADDING: Final[int] = _C.REQ_POOL_IDX_PADDING
TOKEN_TO_KV_SLOT_PADDING: Final[int] = _C.TOKEN_TO_KV_SLOT_PADDING

CANARY_FIELDS_PER_SLOT: Final[int] = _C.CANARY_FIELDS_PER_SLOT
CANARY_FIELD_TOKEN: Final[int] = _C.CANARY_FIELD_TOKEN
CANARY_FIELD_POSITION: Final[int] = _C.CANARY_FIELD_POSITION
CANARY_FIELD_PREV_HASH: Final[int] = _C.CANARY_FIELD_PREV_HASH
CANARY_FIELD_REAL_KV_HASH: Final[int] = _C.CANARY_FIELD_REAL_KV_HASH
CANARY_SLOT_BYTES: Final[int] = _C.CANARY_SLOT_BYTES

VIOLATION_FIELDS: Final[int] = _C.VIOLATION_FIELDS
VIOLATION_FIELD_KERNEL_KIND: Final[int] = _C.VIOLATION_FIELD_KERNEL_KIND
VIOLATION_FIELD_SLOT_IDX: Final[int] = _C.VIOLATION_FIELD_SLOT_IDX
VIOLATION_FIELD_POSITION: Final[int] = _C.VIOLATION_FIELD_POSITION
VIOLATION_FIELD_STORED_TOKEN: Final[int] = _C.VIOLATION_FIELD_STORED_TOKEN
VIOLATION_FIELD_EXPECTED_TOKEN: Final[int] = _C.VIOLATION_FIELD_EXPECTED_TOKEN
VIOLATION_FIELD_STORED_CHAIN_HASH: Final[int] = _C.VIOLATION_FIELD_STORED_CHAIN_HASH
VIOLATION_FIELD_EXPECTED_AUX: Final[int] = _C.VIOLATION_FIELD_EXPECTED_AUX
VIOLATION_FIELD_FAIL_REASON_BITS: Final[int] = _C.VIOLATION_FIELD_FAIL_REASON_BITS

MAX_REAL_KV_SOURCES: Final[int] = _C.MAX_REAL_KV_SOURCES
REAL_KV_SOURCE_FIELDS_PER_ENTRY: Final[int] = _C.REAL_KV_SOURCE_FIELDS_PER_ENTRY
REAL_KV_SOURCE_FIELD_PAGE_SIZE: Final[int] = _C.REAL_KV_SOURCE_FIELD_PAGE_SIZE
REAL_KV_SOURCE_FIELD_NUM_BYTES_PER_TOKEN: Final[int] = _C.REAL_KV_SOURCE_FIELD_NUM_BYTES_PER_TOKEN
REAL_KV_SOURCE_FIELD_READ_BYTES: Final[int] = _C.REAL_KV_SOURCE_FIELD_READ_BYTES

PLAN_BS_BLOCK_SIZE: Final[int] = _C.PLAN_BS_BLOCK_SIZE
SPLITMIX64_MULTIPLIER_1: Final[int] = _C.SPLITMIX64_MULTIPLIER_1
SPLITMIX64_MULTIPLIER_2: Final[int] = _C.SPLITMIX64_MULTIPLIER_2



class FailReason(IntFlag):
    """Bits of column 7 of a violation row; the reporter's label is the lower-cased name without
    its trailing ``_mismatch``."""

    VERIFY_CHAIN_HASH_MISMATCH = _C.VERIFY_CHAIN_HASH_MISMATCH
    VERIFY_POSITION_MISMATCH = _C.VERIFY_POSITION_MISMATCH
    VERIFY_REAL_KV_HASH_MISMATCH = _C.VERIFY_REAL_KV_HASH_MISMATCH
    WRITE_TOKEN_MISMATCH = _C.WRITE_TOKEN_MISMATCH
    WRITE_POSITION_MISMATCH = _C.WRITE_POSITION_MISMATCH
    VERIFY_TOKEN_MISMATCH = _C.VERIFY_TOKEN_MISMATCH


class RealKvHashMode(IntEnum):
    """Which real-KV bytes feed a record's fourth field: none, the first 16 bytes of each source's
    strip, or ``read_bytes`` of each strip."""

    NONE = _C.REAL_KV_HASH_MODE_NONE
    PARTIAL = _C.REAL_KV_HASH_MODE_PARTIAL
    ALL = _C.REAL_KV_HASH_MODE_ALL


CanaryLaunchTag = IntEnum(
    "CanaryLaunchTag",
    [(_C.launch_tag_name(tag), tag) for tag in range(_C.NUM_LAUNCH_TAGS)],
    module=__name__,
)
CanaryLaunchTag.__doc__ = (
    "One tag per (HEAD | TAIL | SWEEP) x (K | V) x (FULL | SWA) launch: stamped into column 0 of "
    "every violation row and indexing the per-tag counter arrays."
)


def splitmix64(x: int) -> int:
    """splitmix64 of ``x`` as an unsigned 64-bit int; negative ``x`` is read as its
    two's-complement bit pattern; ``x`` outside ``[-2**63, 2**64)`` raises ``ValueError``.
    ``splitmix64(0) == 0``."""
    return _C.splitmix64(x)


def splitmix64_mix3(a: int, b: int, c: int) -> int:
    """``h = splitmix64(a); h = splitmix64(h ^ b); return splitmix64(h ^ c)`` on u64 (order
    matters); negative inputs are read as two's complement."""
    return _C.splitmix64_mix3(a, b, c)


def to_signed_int64(x: int) -> int:
    """The int64 holding the bit pattern of the u64 ``x`` (how hashes are stored in tensors)."""
    return _C.to_signed_int64(x)
