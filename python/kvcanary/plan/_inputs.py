"""What every launcher that reads a forward's batch (the plan, its two stages, the fused verify)
takes beyond SGLang's arguments: a paged block table in place of ``req_to_token`` and sampled
verify's rotation. One declaration and one paragraph of documentation for all of them."""

from __future__ import annotations

# The parameter declarations (kvcanary._launch.define_launcher's syntax).
PAGE_TABLE_AND_SAMPLE_PARAMETERS = """
    block_table=None block_size:int=1 verify_sample:int=1 verify_phase=None"""

PAGE_TABLE_AND_SAMPLE_DOC = """

    Page tables and sampled verify (kvcanary additions): ``block_table`` int32 or int64
    ``[rows, max_blocks]``, contiguous, in place of ``req_to_token`` (exactly one of the two is
    given), maps position ``pos`` of row ``rp`` to slot ``block_table[rp, pos // block_size] *
    block_size + pos % block_size``; ``block_size`` is 1 with ``req_to_token``. ``verify_sample =
    K`` in ``[1, 65536]`` verifies a rotating 1/K of every row's prefix: the positions ``pos``
    with ``(pos // 16 + phase) % K == 0``, plus the newest one when it is not among them;
    ``verify_phase`` int64 ``[n >= 1]`` (None: phase 0) gives a row its phase
    ``verify_phase[clamp(rp, 0, n - 1)]``, read on the device, and
    ``launch_advance_verify_phase_kernel`` advances it after each forward. The launches of one
    forward take the same values."""
