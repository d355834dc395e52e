"""The verify operation and the launch context.

Mirrors ``sglang.kernels.ops.kv_canary.verify``: ``RealKvSource``, ``VerifyOrWriteContext``,
``VerifyPlan``, ``CanaryLaunchTag`` and ``launch_canary_verify_kernel`` with SGLang's names and
fields. Tensors are any DLPack objects (torch CPU/CUDA tensors, numpy arrays, ...).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional, Sequence, Union

from kvcanary import _kvcanary as _C
from kvcanary._launch import define_launcher, fill_, require_torch
from kvcanary.consts import CANARY_SLOT_BYTES, CanaryLaunchTag, RealKvHashMode

__all__ = [
    "CANARY_SLOT_BYTES",
    "CanaryLaunchTag",
    "RealKvSource",
    "VerifyOrWriteContext",
    "VerifyPlan",
    "launch_canary_verify_kernel",
    "compute_slot_hash",
    "real_kv_hash",
]


@dataclass(frozen=True, slots=True)
class RealKvSource:
    """A live view of one KV tensor whose bytes a record fingerprints.

    The tensor is read as a byte matrix ``[rows, shape[1] * itemsize]``; for slot ``s`` the strip
    starts at byte ``(s % page_size) * num_bytes_per_token`` of row ``s // page_size`` (row address
    ``data + row * stride(0) * itemsize``) and is ``num_bytes_per_token`` long. ``PARTIAL`` mode
    folds its first 16 bytes, ``ALL`` mode ``read_bytes`` of them. Bytes of a row past
    ``page_size * num_bytes_per_token`` are ignored. Never a copy: the fingerprint reads KV memory.

    Construction checks the source (page size >= 1; ``num_bytes_per_token`` and
    ``read_bytes`` positive multiples of 16 with ``read_bytes <= num_bytes_per_token``; tensor at
    least 2-D with a 16-byte multiple row stride, rows wide enough for ``page_size`` strips, data
    16-byte aligned) and raises ``ValueError`` with SGLang's text.
    """

    tensor: Any
    page_size: int
    num_bytes_per_token: int
    read_bytes: int

    def __post_init__(self) -> None:
        _C.validate_real_kv_source(
            self.tensor, self.page_size, self.num_bytes_per_token, self.read_bytes
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class VerifyOrWriteContext:
    """What a verify or write launch needs besides its plan.

    Fields:
        canary_buf: uint8 ``[num_slots, slot_stride_bytes >= 32]`` records, contiguous.
        kernel_kind: ``CanaryLaunchTag`` (or int) stamped into column 0 of every violation row.
        violation_ring: int64 ``[ring_capacity, 8]`` fill-once rows, shared by all launches.
        violation_write_index: int32 ``[1]``, violations ever recorded (counts past capacity).
        slot_run_counter: int64 ``[1]``, entries processed.
        kernel_run_counter: int64 ``[1]``, launches (+1 per call).
        real_kv_sources: tuple of up to 4 ``RealKvSource``; empty disables the fingerprint.
        real_kv_hash_mode: ``RealKvHashMode`` for all sources.
        enable_chain_position_assert: int32 ``[1]``; the write op's chain-position assert runs
            iff it is non-zero (kept 0 during warm-up and graph capture). Verify ignores it.
    """

    canary_buf: Any
    kernel_kind: Union[CanaryLaunchTag, int]
    violation_ring: Any
    violation_write_index: Any
    slot_run_counter: Any
    kernel_run_counter: Any
    real_kv_sources: tuple = ()
    real_kv_hash_mode: Union[RealKvHashMode, int] = RealKvHashMode.NONE
    enable_chain_position_assert: Any = None


@dataclass(frozen=True, slots=True)
class VerifyPlan:
    """The flat list of records one verify launch checks. Capacity ``C``.

    Fields:
        verify_slot_indices: int64 ``[C]``, canary slot per entry (already SWA-translated).
        verify_expected_tokens: int64 ``[C]``, expected token; ``-1`` = do not check.
        verify_expected_positions: int64 ``[C]``, expected position.
        verify_prev_slot_indices: int64 ``[C]``, predecessor slot; ``-1`` chain head (anchor),
            ``0`` unreachable (chain unchecked).
        verify_num_valid: int32 ``[1]``, active entries ``[0, n)`` (the plan clamps it to ``C``).
        enable: int32 ``[1]``; ``0`` = the plan overflowed and verify does nothing.
    """

    verify_slot_indices: Any
    verify_expected_tokens: Any
    verify_expected_positions: Any
    verify_prev_slot_indices: Any
    verify_num_valid: Any
    enable: Any

    @staticmethod
    def allocation_bytes(verify_capacity: int) -> int:
        """``4 * C * 8 + 2 * 4``; raises ``ValueError`` for ``C <= 0`` or ``C > 2**31 - 1``."""
        return _C.verify_plan_allocation_bytes(verify_capacity)

    @classmethod
    def allocate(cls, verify_capacity: int, device: Any = "cpu") -> "VerifyPlan":
        """torch tensors of capacity ``verify_capacity`` on ``device``: ``enable = 1``, the rest
        zero (callers may not rely on that). Raises ``ValueError`` for a capacity ``<= 0``
        (``kv-canary: VerifyPlan verify_capacity must be positive, got {n}``) or one above the
        int32 device counts."""
        cls.allocation_bytes(verify_capacity)
        torch = require_torch("VerifyPlan.allocate")
        i64 = dict(dtype=torch.int64, device=device)
        return cls(
            verify_slot_indices=torch.zeros(verify_capacity, **i64),
            verify_expected_tokens=torch.zeros(verify_capacity, **i64),
            verify_expected_positions=torch.zeros(verify_capacity, **i64),
            verify_prev_slot_indices=torch.zeros(verify_capacity, **i64),
            verify_num_valid=torch.zeros(1, dtype=torch.int32, device=device),
            enable=torch.ones(1, dtype=torch.int32, device=device),
        )

    def zero_for_testing_(self) -> "VerifyPlan":
        """Sets every array to 0 (``enable`` too, so verify does nothing until a plan runs)
        except ``verify_expected_tokens``, which gets ``-1``; returns ``self``. For plan tests
        only: it hides bugs in verify or write tests."""
        fill_(self.verify_slot_indices, 0)
        fill_(self.verify_expected_tokens, -1)
        fill_(self.verify_expected_positions, 0)
        fill_(self.verify_prev_slot_indices, 0)
        fill_(self.verify_num_valid, 0)
        fill_(self.enable, 0)
        return self


launch_canary_verify_kernel = define_launcher(
    _C.verify, "launch_canary_verify_kernel", __name__,
    stream_from="context.canary_buf", parameters="""
    context:VerifyOrWriteContext plan:VerifyPlan check_verify_expected_token=False
    paired_context:VerifyOrWriteContext=None""",
    doc="""\
    Re-checks the records a forward's attention reads. Read-only on ``canary_buf``.

    Semantics (``N`` = slots, ``C`` = plan capacity)::

        kernel_run_counter += 1                          # always, before the enable check
        if plan.enable[0] == 0: return
        n = clamp(verify_num_valid[0], 0, C); slot_run_counter += n
        for e in range(n):
            slot = verify_slot_indices[e]
            if slot <= 0 or slot >= N: continue          # slot 0 = padding; never checked
            prev = verify_prev_slot_indices[e]; reachable = prev != 0 and prev < N
            chain:    reachable and stored prev_hash != slot_hash(prev)   (prev < 0: head hash)
            token:    check and expected != -1 and stored token != expected
            position: stored position != verify_expected_positions[e]
            real KV:  stored real_kv_hash != fingerprint of the sources' bytes now
            any bit: one row [kind, slot, stored pos, stored tok, expected tok or -1,
                              stored prev_hash, expected prev_hash, bits]

    Edge cases: an empty or overflowed plan only bumps ``kernel_run_counter``; predecessor ``0``
    leaves the chain unchecked; rows past the ring capacity are counted, not stored.

    ``paired_context`` (kvcanary only) verifies a second buffer (the V half) against the same
    plan, as a second launch would. CUDA tensors enqueue on ``stream`` (default: torch's current
    stream of the device for torch tensors, else the default stream); nothing synchronises, so
    the launch may be captured in a CUDA graph. Invalid arguments raise ``ValueError`` before
    anything is written.
    """,
)


def compute_slot_hash(canary_buf: Any, slot_idx: int) -> int:
    """``slot_hash`` (docs/format.md) as a u64, read now from a CPU buffer: the head hash
    ``splitmix64(CANARY_CHAIN_ANCHOR)`` for ``slot_idx < 0``, else
    ``splitmix64_mix3(prev_hash, token, position)`` of the record. ``canary_buf`` is uint8
    ``[N, stride]`` or its int64 view ``[N, stride / 8]``."""
    return _C.compute_slot_hash(canary_buf, slot_idx)


def real_kv_hash(
    real_kv_sources: Sequence[RealKvSource],
    slot_idx: int,
    real_kv_hash_mode: Union[RealKvHashMode, int],
) -> int:
    """The real-KV fingerprint of ``slot_idx`` as a u64, reading CPU sources now
    (not for graph capture)::

        0 if mode == NONE or no sources, else:
        acc = 0; for src in sources: acc = splitmix64(acc ^ fold(src strip of slot_idx))
    """
    return _C.real_kv_hash(real_kv_sources, slot_idx, real_kv_hash_mode)
