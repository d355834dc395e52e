"""The frozen violation message of SGLang's kv-canary reporter.

``format_violation`` renders one violation row as the log block SGLang's reporter prints; tooling
parses its first line with ``launch_tag=(\\S+) fail_reason=(\\S+)``. Tag names and fail-reason
labels come from the C++ format tables (``include/kvcanary/format.h``).
"""

from __future__ import annotations

from typing import Final, Sequence

from kvcanary import _kvcanary as _C
from kvcanary.consts import FailReason, to_signed_int64

__all__ = ["format_violation"]

_U64_MASK: Final[int] = (1 << 64) - 1
_WRITE_BITS: Final[int] = FailReason.WRITE_TOKEN_MISMATCH | FailReason.WRITE_POSITION_MISMATCH
_TOKEN_CHECK_BITS: Final[int] = FailReason.WRITE_TOKEN_MISMATCH | FailReason.VERIFY_TOKEN_MISMATCH


def _hex64(value: int) -> str:
    return f"0x{value & _U64_MASK:016x}"


def _labels(bits: int) -> list[str]:
    """Labels of the set bits in ascending bit order; bits without a label are left out."""
    labels = []
    for index in range(64):
        if bits >> index & 1:
            label = _C.fail_reason_label(to_signed_int64(1 << index))
            if label is not None:
                labels.append(label)
    return labels


def format_violation(
    row: Sequence[int], total_violations: int, ring_overflow: bool, step_when_pumped: int
) -> str:
    """One violation row as the reporter's seven-line message (no trailing newline).

    ``row`` is the ring's 8 int64 columns ``[tag, slot, position, stored_token, expected_token,
    stored_chain_hash, expected_aux, fail_reason_bits]`` (any sequence of ints, e.g. a tensor
    row). Hashes print as 16 lower-case hex digits of their u64 value, other integers in signed
    decimal. A write row (bit 8 or 16) shows ``actual``/``expected`` token and position; a verify
    row shows the stored record and the expected prev_hash, plus the expected token when its
    token check failed (bit 32). Unknown tags print ``unknown(<n>)``; no labelled bit ``none``.
    """
    kind, slot, position, stored_token, expected_token, stored_chain, expected_aux, bits = (
        int(value) for value in row
    )
    bits &= _U64_MASK
    tag = _C.launch_tag_name(kind)
    if tag is None:
        tag = canary_kind = f"unknown({kind})"
    elif tag.startswith("SWEEP_"):
        canary_kind = tag.lower()
    else:
        canary_kind = "per_forward_" + tag.lower()
    labels = _labels(bits)
    reasons_joined = "+".join(labels) or "none"
    reasons_spaced = " ".join(labels) or "none"

    stored = f"token_id={stored_token}   position={position} prev_hash={_hex64(stored_chain)}"
    if bits & _WRITE_BITS:
        body = [
            f"  actual:   {stored}",
            f"  expected: token_id={expected_token}   position={expected_aux}",
        ]
    elif bits & _TOKEN_CHECK_BITS:
        body = [
            f"  stored:   {stored}",
            f"  expected: token_id={expected_token} prev_hash={_hex64(expected_aux)}",
        ]
    else:
        body = [f"  stored:   {stored}", f"  expected: prev_hash={_hex64(expected_aux)}"]

    lines = [
        f"kv_canary violation: launch_tag={tag} fail_reason={reasons_joined} slot_idx={slot} "
        f"position={position} stored_token={stored_token} expected_token={expected_token} "
        f"stored_chain_hash={_hex64(stored_chain)} expected_aux={_hex64(expected_aux)}",
        f"KV cache canary violation detected (kernel_kind={tag}, slot_idx={slot}, "
        f"position={position})",
        f"canary_kind:       {canary_kind}",
        f"  fail_reasons: {reasons_spaced}",
        *body,
        f"  total_violations={int(total_violations)} ring_overflow={bool(ring_overflow)} "
        f"step_when_pumped={int(step_when_pumped)}",
    ]
    return "\n".join(lines)
