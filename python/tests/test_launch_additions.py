"""kvcanary's additions to the SGLang launchers, against oracles written here: a block table in
place of req_to_token, sampled verify's positions and its phase advance, and a fused verify that
reads stored entries instead of deriving them."""

import numpy as np
import pytest
from conftest import State, make_plans

import kvcanary

RUN = 16  # sampled verify checks runs of 16 consecutive positions


def _plan(xp, capacity, table, rows, prefix, **extra):
    verify, write = make_plans(xp, capacity, len(rows))
    kvcanary.launch_canary_plan_kernels(
        verify_plan_out=verify, write_plan_out=write, req_pool_indices=xp.array(rows),
        prefix_lens=xp.array(prefix), extend_seq_lens=xp.array([1] * len(rows)),
        verify_capacity=capacity, **table, **extra)
    count = xp.tolist(verify.verify_num_valid)[0]
    return {name: xp.tolist(getattr(verify, name))[:count] for name in (
        "verify_slot_indices", "verify_expected_positions", "verify_prev_slot_indices")}


def _paged_pool(rng, rows, max_blocks, block):
    """A block table with distinct random blocks (block 0 unused) and the per-token table that
    names the same slots."""
    blocks = rng.permutation(np.arange(1, rows * max_blocks + 1)).reshape(rows, max_blocks)
    positions = np.arange(max_blocks * block)
    per_token = blocks[:, positions // block] * block + positions % block
    return blocks, np.ascontiguousarray(per_token)


@pytest.mark.parametrize("dtype", ["int32", "int64"])
def test_a_block_table_plans_what_its_per_token_table_plans(xp, dtype):
    rng = np.random.default_rng(11)
    blocks, per_token = _paged_pool(rng, rows=5, max_blocks=6, block=8)
    rows, prefix = [3, 0, 1, 4], [41, 0, 8, 17]
    paged = _plan(xp, 128, dict(block_table=xp.array(blocks, dtype), block_size=8), rows, prefix)
    flat = _plan(xp, 128, dict(req_to_token=xp.array(per_token, "int32")), rows, prefix)
    assert paged == flat
    assert len(paged["verify_slot_indices"]) == 41 + 8 + 17
    assert paged["verify_slot_indices"][:2] == [int(per_token[3, 0]), int(per_token[3, 1])]


def _sampled_positions(prefix, phase, sample):
    """The positions a forward verifies: every run b with (b + phase) % K == 0, and the newest."""
    chosen = [p for p in range(prefix) if (p // RUN + phase) % sample == 0]
    if prefix > 0 and prefix - 1 not in chosen:
        chosen.append(prefix - 1)
    return chosen


@pytest.mark.parametrize("sample", [2, 3, 8])
def test_sampled_verify_checks_the_rotating_runs_and_the_newest_position(xp, sample):
    table = np.arange(1, 4 * 200 + 1, dtype=np.int32).reshape(4, 200)
    rows, prefix = [1, 3, 2], [150, 33, 16]
    phase = [5, 0, -7, 2]  # per req_to_token row; negative phases reduce like positive ones
    entries = _plan(xp, 600, dict(req_to_token=xp.array(table, "int32")), rows, prefix,
                    verify_sample=sample, verify_phase=xp.array(phase))
    expected = [(rp, p) for rp, n in zip(rows, prefix)
                for p in _sampled_positions(n, phase[rp], sample)]
    assert entries["verify_expected_positions"] == [p for _, p in expected]
    assert entries["verify_slot_indices"] == [int(table[rp, p]) for rp, p in expected]
    # K consecutive phases cover every position of each prefix.
    covered = {rp: set() for rp in rows}
    for shift in range(sample):
        shifted = [value + shift for value in phase]
        for rp, n in zip(rows, prefix):
            covered[rp].update(_sampled_positions(n, shifted[rp], sample))
    assert all(covered[rp] == set(range(n)) for rp, n in zip(rows, prefix))


def test_advancing_the_phase_adds_one_per_live_row(xp):
    phase = xp.array([10, 20, 30, 40])
    kvcanary.launch_advance_verify_phase_kernel(verify_phase=phase,
                                                req_pool_indices=xp.array([2, 0, 2, 9, 1]))
    # Row 0 is padding; 9 clamps to the last entry; a row given twice adds twice.
    assert xp.tolist(phase) == [10, 21, 32, 41]
    kvcanary.launch_advance_verify_phase_kernel(verify_phase=phase)
    assert xp.tolist(phase) == [11, 22, 33, 42]
    wrapping = xp.array([2**63 - 1])
    kvcanary.launch_advance_verify_phase_kernel(verify_phase=wrapping)
    assert xp.tolist(wrapping) == [-(2**63)]


class _Stored:
    """A clean two-request pool, its offsets, and the plan entries a fused verify may read."""

    def __init__(self, xp, capacity):
        self.xp = xp
        self.state = State(xp, 40)
        table = np.zeros((3, 16), np.int32)
        table[1, :6] = np.arange(1, 7)
        table[2, :5] = np.arange(11, 16)
        self.batch = dict(req_pool_indices=xp.array([1, 2]), prefix_lens=xp.array([6, 5]),
                          req_to_token=xp.array(table, "int32"))
        # Write the records of both prefixes (a prefill: nothing to verify yet).
        verify, write = make_plans(xp, 32, 2)
        kvcanary.launch_canary_plan_kernels(
            verify_plan_out=verify, write_plan_out=write, req_pool_indices=xp.array([1, 2]),
            prefix_lens=xp.array([0, 0]), extend_seq_lens=xp.array([6, 5]),
            req_to_token=self.batch["req_to_token"], verify_capacity=32)
        kvcanary.launch_canary_write_kernel(
            context=self.state.context(), plan=write, input_ids=xp.array(range(100, 111)),
            positions=xp.array(list(range(6)) + list(range(5))),
            out_cache_loc=xp.array(list(table[1, :6]) + list(table[2, :5])),
            enable_write_input_assert=False)
        self.scratch = xp.zeros(4)
        self.counts, _ = make_plans(xp, 32, 2)
        kvcanary.launch_canary_plan_kernels(
            verify_plan_out=self.counts, write_plan_out=write, **self.batch,
            extend_seq_lens=xp.array([1, 1]), verify_capacity=32,
            verify_offsets_scratch=self.scratch)
        self.stored, _ = make_plans(xp, capacity, 2)
        if capacity >= 11:  # the arrays hold the 11 entries: store them
            kvcanary.launch_plan_entries_kernel(
                **self.batch, verify_offsets_scratch=self.scratch,
                verify_enable=self.counts.enable,
                out_verify_slot_indices=self.stored.verify_slot_indices,
                out_verify_expected_tokens=self.stored.verify_expected_tokens,
                out_verify_expected_positions=self.stored.verify_expected_positions,
                out_verify_prev_slot_indices=self.stored.verify_prev_slot_indices)

    def verify(self, stored_entries):
        kvcanary.launch_canary_fused_verify_kernel(
            context=self.state.context(), **self.batch, verify_offsets_scratch=self.scratch,
            verify_num_valid=self.counts.verify_num_valid, verify_enable=self.counts.enable,
            verify_capacity=32, stored_entries=stored_entries)


def test_a_fused_verify_reads_stored_entries_that_hold_its_entries(xp):
    pool = _Stored(xp, capacity=11)
    pool.verify(None)
    pool.verify(pool.stored)
    # The prefill's write (11 records), then two verifies of 11 entries.
    assert pool.state.rows() == [] and pool.state.counters() == (3, 33)
    # Entry 3 (row 1, position 3) stored with a wrong position: the verify reports what the
    # arrays say, so they were read.
    pool.stored.verify_expected_positions[3] = 7
    pool.verify(pool.stored)
    rows = pool.state.rows()
    assert len(rows) == 1
    assert rows[0][kvcanary.VIOLATION_FIELD_SLOT_IDX] == 4
    assert rows[0][kvcanary.VIOLATION_FIELD_POSITION] == 3
    assert rows[0][kvcanary.VIOLATION_FIELD_FAIL_REASON_BITS] == \
        kvcanary.FailReason.VERIFY_POSITION_MISMATCH


def test_a_fused_verify_derives_entries_its_stored_arrays_cannot_hold(xp):
    pool = _Stored(xp, capacity=10)  # 11 entries: the arrays (never filled) are not read
    pool.stored.verify_expected_positions[:] = 7
    pool.verify(pool.stored)
    assert pool.state.rows() == [] and pool.state.counters() == (2, 22)
