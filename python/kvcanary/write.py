"""The write operation and its plan.

Mirrors ``sglang.kernels.ops.kv_canary.write``: ``WritePlan`` and ``launch_canary_write_kernel``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from kvcanary import _kvcanary as _C
from kvcanary._launch import define_launcher, fill_, require_torch
from kvcanary.verify import VerifyOrWriteContext

__all__ = ["WritePlan", "launch_canary_write_kernel"]


@dataclass(frozen=True, slots=True)
class WritePlan:
    """Per-row write ranges and chain seeds of one write launch. Capacity ``R``.

    Fields:
        write_offsets: int64 ``[R + 1]``, exclusive prefix sum of per-row write counts; row ``r``
            owns flat token indices ``[write_offsets[r], write_offsets[r + 1])`` of the forward's
            ``input_ids`` / ``positions`` / ``out_cache_loc``.
        write_seed_slot_indices: int64 ``[R]``, per-row seed slot (SWA-translated); ``-1`` starts
            the chain at the anchor.
        write_num_valid_reqs: int32 ``[1]``, rows the write op processes (padding rows included).
    """

    write_offsets: Any
    write_seed_slot_indices: Any
    write_num_valid_reqs: Any

    @staticmethod
    def allocation_bytes(write_req_capacity: int) -> int:
        """``(2 * R + 1) * 8 + 4``; raises ``ValueError`` for ``R <= 0`` or ``R > 2**31 - 1``."""
        return _C.write_plan_allocation_bytes(write_req_capacity)

    @classmethod
    def allocate(cls, write_req_capacity: int, device: Any = "cpu") -> "WritePlan":
        """torch tensors of capacity ``write_req_capacity`` on ``device``, zeroed (callers may
        not rely on that). Raises ``ValueError`` for a capacity ``<= 0`` (``kv-canary: WritePlan
        write_req_capacity must be positive, got {n}``) or one above the int32 device counts."""
        cls.allocation_bytes(write_req_capacity)
        torch = require_torch("WritePlan.allocate")
        return cls(
            write_offsets=torch.zeros(write_req_capacity + 1, dtype=torch.int64, device=device),
            write_seed_slot_indices=torch.zeros(
                write_req_capacity, dtype=torch.int64, device=device
            ),
            write_num_valid_reqs=torch.zeros(1, dtype=torch.int32, device=device),
        )

    def zero_for_testing_(self) -> "WritePlan":
        """Sets every array to 0 and returns ``self``. For plan tests only."""
        fill_(self.write_offsets, 0)
        fill_(self.write_seed_slot_indices, 0)
        fill_(self.write_num_valid_reqs, 0)
        return self


launch_canary_write_kernel = define_launcher(
    _C.write, "launch_canary_write_kernel", __name__,
    stream_from="context.canary_buf", parameters="""
    context:VerifyOrWriteContext plan:WritePlan input_ids positions out_cache_loc
    enable_write_input_assert=False expected_input_tokens=None expected_input_positions=None
    paired_context:VerifyOrWriteContext=None""",
    doc="""\
    Stores the record of every token a forward writes.

    ``input_ids``, ``positions`` and ``out_cache_loc`` are the forward's int64 ``[num_tokens]``
    tensors (``out_cache_loc`` already SWA-translated; a negative slot skips the token). The
    expected tensors are given iff ``enable_write_input_assert``. Semantics (``N`` = slots)::

        kernel_run_counter += 1
        for r in range(clamp(write_num_valid_reqs[0], 0, R)):
            tokens [a, b) = write_offsets[r], write_offsets[r+1] clamped to [0, num_tokens]
            seed = write_seed_slot_indices[r]; has_seed = 0 <= seed < N
            H = slot_hash(seed) if has_seed else splitmix64(CANARY_CHAIN_ANCHOR)
            last_pos = record(seed).position     (chain assert: has_seed and flag != 0)
            for i in range(a, b):
                slot = out_cache_loc[i]; skip (H does not advance) if slot < 0 or slot >= N
                input assert: token/position != expected -> row (bits 8 and/or 16)
                chain assert: position != last_pos + 1  -> row (bit 16, aux = last_pos + 1)
                record(slot) = (token, position, H, real_kv_hash(slot))
                H = splitmix64_mix3(H, token, position)   # the ACTUAL values: no cascade
            slot_run_counter += tokens written

    All seeds are read before any record is written; slot 0 is written if asked. The chain
    advances on the actual inputs, so a downstream verify does not cascade.

    ``paired_context`` (kvcanary only) writes a second buffer (the V half) from the same plan and
    inputs, as a second launch would. CUDA tensors enqueue on ``stream`` (default: torch's current
    stream for torch tensors, else the default stream); no synchronisation, graph-capturable.
    Invalid arguments raise ``ValueError`` before anything is written.
    """,
)
