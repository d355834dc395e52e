"""Const-sync and hash pins: the Python names of the canary format against SGLang's values and
the C++ exports, and the splitmix64 vectors of docs/format.md."""

import enum

import pytest

import kvcanary
from kvcanary import _kvcanary as _C
from kvcanary import consts

# SGLang's constant values, written out once here so a drift in format.h or the binding fails a
# test.
SPEC_CONSTANTS = {
    "CANARY_CHAIN_ANCHOR": 0xC0FFEE1234567890,
    "REQ_POOL_IDX_PADDING": 0,
    "TOKEN_TO_KV_SLOT_PADDING": 0,
    "CANARY_FIELDS_PER_SLOT": 4,
    "CANARY_FIELD_TOKEN": 0,
    "CANARY_FIELD_POSITION": 1,
    "CANARY_FIELD_PREV_HASH": 2,
    "CANARY_FIELD_REAL_KV_HASH": 3,
    "CANARY_SLOT_BYTES": 32,
    "VIOLATION_FIELDS": 8,
    "VIOLATION_FIELD_KERNEL_KIND": 0,
    "VIOLATION_FIELD_SLOT_IDX": 1,
    "VIOLATION_FIELD_POSITION": 2,
    "VIOLATION_FIELD_STORED_TOKEN": 3,
    "VIOLATION_FIELD_EXPECTED_TOKEN": 4,
    "VIOLATION_FIELD_STORED_CHAIN_HASH": 5,
    "VIOLATION_FIELD_EXPECTED_AUX": 6,
    "VIOLATION_FIELD_FAIL_REASON_BITS": 7,
    "MAX_REAL_KV_SOURCES": 4,
    "REAL_KV_SOURCE_FIELDS_PER_ENTRY": 3,
    "REAL_KV_SOURCE_FIELD_PAGE_SIZE": 0,
    "REAL_KV_SOURCE_FIELD_NUM_BYTES_PER_TOKEN": 1,
    "REAL_KV_SOURCE_FIELD_READ_BYTES": 2,
    "PLAN_BS_BLOCK_SIZE": 4096,
    "SPLITMIX64_MULTIPLIER_1": 0xBF58476D1CE4E5B9,
    "SPLITMIX64_MULTIPLIER_2": 0x94D049BB133111EB,
}

SPEC_FAIL_REASONS = {
    "VERIFY_CHAIN_HASH_MISMATCH": 1,
    "VERIFY_POSITION_MISMATCH": 2,
    "VERIFY_REAL_KV_HASH_MISMATCH": 4,
    "WRITE_TOKEN_MISMATCH": 8,
    "WRITE_POSITION_MISMATCH": 16,
    "VERIFY_TOKEN_MISMATCH": 32,
}

SPEC_TAGS = [
    "HEAD_K_FULL", "HEAD_V_FULL", "TAIL_K_FULL", "TAIL_V_FULL", "SWEEP_K_FULL", "SWEEP_V_FULL",
    "HEAD_K_SWA", "HEAD_V_SWA", "TAIL_K_SWA", "TAIL_V_SWA", "SWEEP_K_SWA", "SWEEP_V_SWA",
]


@pytest.mark.parametrize("name,value", sorted(SPEC_CONSTANTS.items()))
def test_constant_matches_spec_and_cpp(name, value):
    assert getattr(consts, name) == value
    assert getattr(kvcanary, name) == value
    assert getattr(_C, name) == value


def test_enums_match_spec_and_cpp():
    assert issubclass(consts.FailReason, enum.IntFlag)
    assert {m.name: m.value for m in consts.FailReason} == SPEC_FAIL_REASONS
    for name, bit in SPEC_FAIL_REASONS.items():
        assert getattr(_C, name) == bit
        # The reporter label: lower-cased name without its trailing "_mismatch".
        assert _C.fail_reason_label(bit) == name.lower().removesuffix("_mismatch")
    assert issubclass(consts.RealKvHashMode, enum.IntEnum)
    assert [(m.name, m.value) for m in consts.RealKvHashMode] == [
        ("NONE", 0), ("PARTIAL", 1), ("ALL", 2)]
    assert issubclass(consts.CanaryLaunchTag, enum.IntEnum)
    assert [m.name for m in consts.CanaryLaunchTag] == SPEC_TAGS
    assert [m.value for m in consts.CanaryLaunchTag] == list(range(12))
    assert kvcanary.verify.CanaryLaunchTag is consts.CanaryLaunchTag


SPLITMIX64_PINS = [
    (0x9E3779B97F4A7C15, 0xE220A8397B1DCDAF),
    (0x0000000000000001, 0x5692161D100B05E5),
    (0xDEADBEEFCAFEBABE, 0x7AD6664F09FFE52C),
    (0xFFFFFFFFFFFFFFFF, 0xB4D055FCF2CBBD7B),
    (0x8000000000000000, 0x25C26EA579CEA98A),
    (0xC0FFEE1234567890, 0xDE7FAE23A9A1B716),
    (0x0000000000000000, 0x0000000000000000),
]


@pytest.mark.parametrize("x,expected", SPLITMIX64_PINS)
def test_splitmix64_pins(x, expected):
    assert kvcanary.splitmix64(x) == expected


def test_negative_inputs_are_twos_complement():
    assert kvcanary.splitmix64(-1) == 0xB4D055FCF2CBBD7B
    assert kvcanary.splitmix64(-(1 << 63)) == 0x25C26EA579CEA98A
    assert kvcanary.splitmix64_mix3(0xDE7FAE23A9A1B716, -1, 0) == 0xE5A9A05404A720CF
    assert kvcanary.splitmix64_mix3(0xDE7FAE23A9A1B716, (1 << 64) - 1, 0) == 0xE5A9A05404A720CF
    assert kvcanary.splitmix64_mix3(0, 0, 0) == 0


def test_mix3_order_matters():
    assert kvcanary.splitmix64_mix3(1, 2, 3) != kvcanary.splitmix64_mix3(3, 2, 1)


def test_to_signed_int64():
    assert kvcanary.to_signed_int64(0xDE7FAE23A9A1B716) == -2414019407054260458
    assert kvcanary.to_signed_int64(0x7FFFFFFFFFFFFFFF) == (1 << 63) - 1
    assert kvcanary.to_signed_int64(1 << 63) == -(1 << 63)
    assert kvcanary.to_signed_int64(-5) == -5
    assert kvcanary.to_signed_int64(5) == 5
