"""The published vectors (docs/format.md) through the Python launchers, on every backend:
the [11, 22, 33, 44, 55] chain, the decode step, verify after corruption, the write asserts,
real-KV fingerprints, and the plan hand cases H1-H6 and L1-L5."""

import numpy as np
import pytest
from conftest import State, make_plans

import kvcanary
from kvcanary import CanaryLaunchTag, RealKvHashMode, RealKvSource, to_signed_int64 as S

TAIL = int(CanaryLaunchTag.TAIL_K_FULL)
CHAIN_PREV = [-2414019407054260458, -8517104317260626359, 6305883652896473243,
              -775092142951646884, 6894519779082095460]
RUNNING_AFTER_4 = -5875451248450912187  # 0xae76343810f54045


class ChainWorld:
    """8 slots, req_to_token[1] = [1..7, 0]; one request at row 1."""

    def __init__(self, xp):
        self.xp = xp
        self.state = State(xp, 8)
        table = np.zeros((2, 8), np.int32)
        table[1, :7] = np.arange(1, 8)
        self.req_to_token = xp.array(table, "int32")

    def plan(self, prefix, extend, pool=None, valid_lens=None):
        verify, write = make_plans(self.xp, 16, 4)
        kvcanary.launch_canary_plan_kernels(
            verify_plan_out=verify, write_plan_out=write,
            req_pool_indices=self.xp.array([1]), prefix_lens=self.xp.array([prefix]),
            extend_seq_lens=self.xp.array([extend]), req_to_token=self.req_to_token,
            swa_window_size=0, full_to_swa_index_mapping=None, verify_capacity=16,
            req_to_verify_expected_tokens=pool,
            req_to_verify_expected_tokens_valid_lens=valid_lens,
            kv_token_id_vs_position_offset=0)
        return verify, write

    def write(self, write_plan, tokens, positions, slots, expected=None):
        xp = self.xp
        kvcanary.launch_canary_write_kernel(
            context=self.state.context(TAIL), plan=write_plan,
            input_ids=xp.array(tokens), positions=xp.array(positions),
            out_cache_loc=xp.array(slots), enable_write_input_assert=expected is not None,
            expected_input_tokens=None if expected is None else xp.array(expected[0]),
            expected_input_positions=None if expected is None else xp.array(expected[1]))

    def verify(self, verify_plan, check_token=False):
        kvcanary.launch_canary_verify_kernel(context=self.state.context(TAIL), plan=verify_plan,
                                             check_verify_expected_token=check_token)

    def prefill_and_decode(self):
        self.write(self.plan(0, 5)[1], [11, 22, 33, 44, 55], [0, 1, 2, 3, 4], [1, 2, 3, 4, 5])
        verify, write = self.plan(5, 1)
        self.verify(verify)
        self.write(write, [66], [5], [6])

    def corrupted_rows(self, slot, field, value):
        """The rows a verify of all six records finds after the decode step, with `field` of
        slot `slot`'s record set to `value`."""
        self.prefill_and_decode()
        self.state.set_field(slot, field, value)
        self.verify(self.plan(6, 0)[0])
        return self.state.rows()


def test_prefill_writes_the_published_chain(xp):
    world = ChainWorld(xp)
    world.write(world.plan(0, 5)[1], [11, 22, 33, 44, 55], [0, 1, 2, 3, 4], [1, 2, 3, 4, 5])
    for i in range(5):
        assert world.state.record(i + 1) == [11 * (i + 1), i, CHAIN_PREV[i], 0]
    assert world.state.record(0) == [0, 0, 0, 0]
    assert world.state.counters() == (1, 5)
    host = xp.host_canary(world.state.canary)
    assert kvcanary.compute_slot_hash(host, 5) == 0xAE76343810F54045
    assert kvcanary.compute_slot_hash(xp.as_int64(host), 5) == 0xAE76343810F54045
    assert kvcanary.compute_slot_hash(host, -1) == 0xDE7FAE23A9A1B716


def test_decode_step_plans_verifies_and_writes(xp):
    world = ChainWorld(xp)
    world.write(world.plan(0, 5)[1], [11, 22, 33, 44, 55], [0, 1, 2, 3, 4], [1, 2, 3, 4, 5])
    verify, write = world.plan(5, 1)
    assert xp.tolist(verify.verify_num_valid) == [5]
    assert xp.tolist(verify.enable) == [1]
    assert xp.tolist(verify.verify_slot_indices)[:5] == [1, 2, 3, 4, 5]
    assert xp.tolist(verify.verify_prev_slot_indices)[:5] == [-1, 1, 2, 3, 4]
    assert xp.tolist(verify.verify_expected_positions)[:5] == [0, 1, 2, 3, 4]
    assert xp.tolist(verify.verify_expected_tokens)[:5] == [-1] * 5
    assert xp.tolist(write.write_offsets)[:2] == [0, 1]
    assert xp.tolist(write.write_seed_slot_indices)[:1] == [5]
    world.verify(verify)
    assert world.state.rows() == []
    assert world.state.counters() == (2, 10)
    world.write(write, [66], [5], [6])
    assert world.state.record(6) == [66, 5, RUNNING_AFTER_4, 0]


def test_token_corruption_breaks_the_successors_chain(xp):
    assert ChainWorld(xp).corrupted_rows(3, kvcanary.CANARY_FIELD_TOKEN, 34) == [
        [TAIL, 4, 3, 44, -1, S(0xF53E51CD772BB95C), S(0x8B2A107792878536), 1]]


def test_position_corruption_flags_the_slot_and_its_successor(xp):
    assert ChainWorld(xp).corrupted_rows(2, kvcanary.CANARY_FIELD_POSITION, 9) == [
        [TAIL, 2, 9, 22, -1, S(0x89CD2ABFBEBC0649), S(0x89CD2ABFBEBC0649), 2],
        [TAIL, 3, 2, 33, -1, S(0x5782FFC5B5D6409B), S(0xC8D30AAA5EC35A95), 1]]


def test_token_check_flags_a_pool_mismatch(xp):
    world = ChainWorld(xp)
    world.prefill_and_decode()
    pool = xp.array([[0] * 8, [11, 22, 33, 45, 55, 66, 0, 0]], "int32")
    verify, _ = world.plan(6, 0, pool=pool, valid_lens=xp.array([6]))
    world.verify(verify, check_token=False)
    assert world.state.rows() == []  # the check is off: the pool token is not compared
    world.verify(verify, check_token=True)
    assert world.state.rows() == [
        [TAIL, 4, 3, 44, 45, S(0xF53E51CD772BB95C), S(0xF53E51CD772BB95C), 32]]


def test_write_asserts_record_input_then_chain_rows(xp):
    world = ChainWorld(xp)
    world.prefill_and_decode()
    world.state.chain_assert[0] = 1
    world.write(world.plan(5, 1)[1], [77], [7], [7], expected=([78], [7]))
    assert world.state.rows() == [
        [TAIL, 7, 7, 77, 78, S(0xAE76343810F54045), 7, 8],
        [TAIL, 7, 7, 77, 77, S(0xAE76343810F54045), 5, 16]]
    assert world.state.record(7) == [77, 7, RUNNING_AFTER_4, 0]


# Real-KV fingerprints, through the host helper ---------------------------------------

def _bytes(xp, rows, cols, first=0):
    return xp.array(((np.arange(rows * cols) + first) % 256).reshape(rows, cols), "uint8")


def test_real_kv_one_sixteen_byte_source(host_xp):
    source = RealKvSource(_bytes(host_xp, 1, 16), 1, 16, 16)
    assert kvcanary.real_kv_hash((source,), 0, RealKvHashMode.PARTIAL) == 0xD6D75024DFD6C30C
    assert kvcanary.real_kv_hash([source], 0, RealKvHashMode.ALL) == 0xD6D75024DFD6C30C
    assert kvcanary.real_kv_hash([source], 0, RealKvHashMode.NONE) == 0
    assert kvcanary.real_kv_hash([], 0, RealKvHashMode.ALL) == 0


def test_real_kv_thirty_two_bytes_fold_all_or_sixteen(host_xp):
    source = RealKvSource(tensor=_bytes(host_xp, 1, 32), page_size=1, num_bytes_per_token=32,
                          read_bytes=32)
    assert kvcanary.real_kv_hash([source], 0, RealKvHashMode.ALL) == 0xB44181DFE9420039
    assert kvcanary.real_kv_hash([source], 0, RealKvHashMode.PARTIAL) == 0xD6D75024DFD6C30C


def test_real_kv_two_sources_combine_in_order(host_xp):
    a = RealKvSource(_bytes(host_xp, 1, 16, 0x00), 1, 16, 16)
    b = RealKvSource(_bytes(host_xp, 1, 16, 0x10), 1, 16, 16)
    assert kvcanary.real_kv_hash([a, b], 0, RealKvHashMode.ALL) == 0xB6209A488C3F52B0
    assert kvcanary.real_kv_hash([b, a], 0, RealKvHashMode.ALL) != 0xB6209A488C3F52B0


def test_real_kv_zero_bytes_fingerprint_to_zero(host_xp):
    source = RealKvSource(host_xp.zeros((1, 16), "uint8"), 1, 16, 16)
    assert kvcanary.real_kv_hash([source], 0, RealKvHashMode.PARTIAL) == 0


def test_real_kv_paged_source(host_xp):
    table = (np.arange(3 * 64) % 256).reshape(3, 64)
    table[2] = 0
    source = RealKvSource(host_xp.array(table, "uint8"), 2, 32, 32)
    expected_all = [0x9F04B7EE5EEE5BD3, 0x4E612227CD041419, 0x40612C9889DF0761, 0x0]
    for slot, expected in zip([1, 2, 3, 4], expected_all):
        assert kvcanary.real_kv_hash([source], slot, RealKvHashMode.ALL) == expected
    expected_partial = [0x2C75CA2B6B98A11A, 0x8D15D2B76F386F4B, 0x344BDAF9666261F8]
    for slot, expected in zip([1, 2, 3], expected_partial):
        assert kvcanary.real_kv_hash([source], slot, RealKvHashMode.PARTIAL) == expected


def test_real_kv_source_of_wider_dtype_is_read_as_bytes(host_xp):
    # int32 [1, 4] is the byte matrix [1, 16] holding 00 01 .. 0F (little-endian words).
    words = np.arange(16, dtype=np.uint8).view(np.int32).reshape(1, 4)
    source = RealKvSource(host_xp.array(words, "int32"), 1, 16, 16)
    assert kvcanary.real_kv_hash([source], 0, RealKvHashMode.PARTIAL) == 0xD6D75024DFD6C30C


def test_write_stores_the_fingerprint_and_verify_rechecks_it(xp):
    state = State(xp, 8)
    kv = xp.zeros((8, 16), "uint8")
    kv[1] = xp.array(np.arange(16), "uint8")
    context = state.context(TAIL, sources=[RealKvSource(kv, 1, 16, 16)],
                            mode=RealKvHashMode.PARTIAL)
    verify, write = make_plans(xp, 4, 1)
    write.write_offsets[1] = 1
    write.write_seed_slot_indices[0] = -1
    write.write_num_valid_reqs[0] = 1
    kvcanary.launch_canary_write_kernel(
        context=context, plan=write, input_ids=xp.array([11]), positions=xp.array([0]),
        out_cache_loc=xp.array([1]), enable_write_input_assert=False,
        expected_input_tokens=None, expected_input_positions=None)
    assert state.record(1) == [11, 0, CHAIN_PREV[0], -2965813710295743732]

    verify.verify_slot_indices[0] = 1
    verify.verify_prev_slot_indices[0] = -1
    verify.verify_expected_positions[0] = 0
    verify.verify_num_valid[0] = 1
    kvcanary.launch_canary_verify_kernel(context=context, plan=verify,
                                         check_verify_expected_token=False)
    assert state.rows() == []
    kv[1, 3] = 0xFF  # the KV changed after the record was written
    kvcanary.launch_canary_verify_kernel(context=context, plan=verify,
                                         check_verify_expected_token=False)
    rows = state.rows()
    assert len(rows) == 1
    assert rows[0][:3] == [TAIL, 1, 0] and rows[0][7] == 4


# Plan hand cases ---------------------------------------------------------------------

def _linear_table(xp, rows=3, width=16):
    return xp.array(np.arange(rows)[:, None] * 16 + np.arange(width)[None, :], "int32")


def _plan(xp, verify, write, rp, prefix, extend, table, capacity=16, **kwargs):
    kvcanary.launch_canary_plan_kernels(
        verify_plan_out=verify, write_plan_out=write, req_pool_indices=xp.array(rp),
        prefix_lens=xp.array(prefix), extend_seq_lens=xp.array(extend), req_to_token=table,
        verify_capacity=capacity, **kwargs)


def _entries(xp, verify):
    n = xp.tolist(verify.verify_num_valid)[0]
    return (xp.tolist(verify.verify_slot_indices)[:n], xp.tolist(verify.verify_prev_slot_indices)[:n],
            xp.tolist(verify.verify_expected_positions)[:n],
            xp.tolist(verify.verify_expected_tokens)[:n])


def test_plan_h1_fresh_request(xp):
    verify, write = make_plans(xp, 16, 8)
    verify.zero_for_testing_()
    write.zero_for_testing_()
    _plan(xp, verify, write, [1], [0], [5], _linear_table(xp))
    assert xp.tolist(verify.verify_num_valid) == [0] and xp.tolist(verify.enable) == [1]
    assert xp.tolist(write.write_offsets) == [0, 5, 0, 0, 0, 0, 0, 0, 0]
    assert xp.tolist(write.write_seed_slot_indices)[:1] == [-1]
    assert xp.tolist(write.write_num_valid_reqs) == [1]


def test_plan_h2_decode(xp):
    verify, write = make_plans(xp, 16, 8)
    _plan(xp, verify, write, [1], [7], [1], _linear_table(xp))
    slots, prevs, positions, tokens = _entries(xp, verify)
    assert slots == list(range(16, 23))
    assert prevs == [-1] + list(range(16, 22))
    assert positions == list(range(7))
    assert tokens == [-1] * 7
    assert xp.tolist(write.write_offsets)[:3] == [0, 1, 0]
    assert xp.tolist(write.write_seed_slot_indices)[:1] == [22]


def test_plan_h3_padding_row_and_h6_rerun(xp):
    verify, write = make_plans(xp, 16, 8)
    table = _linear_table(xp)
    _plan(xp, verify, write, [1, 0, 2], [3, 5, 2], [1, 1, 1], table)
    slots, prevs, positions, _ = _entries(xp, verify)
    assert slots == [16, 17, 18, 32, 33]
    assert prevs == [-1, 16, 17, -1, 32]
    assert positions == [0, 1, 2, 0, 1]
    assert xp.tolist(write.write_offsets) == [0, 1, 1, 2, 0, 0, 0, 0, 0]
    assert xp.tolist(write.write_seed_slot_indices)[:3] == [18, -1, 33]
    assert xp.tolist(write.write_num_valid_reqs) == [3]
    _plan(xp, verify, write, [1], [0], [5], table)  # H6
    assert xp.tolist(write.write_offsets) == [0, 5, 0, 0, 0, 0, 0, 0, 0]


def test_plan_h4_overflow_writes_no_entries(xp):
    verify, write = make_plans(xp, 4, 8)
    verify.zero_for_testing_()
    _plan(xp, verify, write, [1, 2], [5, 3], [1, 1], _linear_table(xp), capacity=4)
    assert xp.tolist(verify.verify_num_valid) == [4] and xp.tolist(verify.enable) == [0]
    assert xp.tolist(verify.verify_slot_indices) == [0, 0, 0, 0]
    assert xp.tolist(verify.verify_expected_tokens) == [-1, -1, -1, -1]
    assert xp.tolist(write.write_offsets)[:4] == [0, 1, 2, 0]
    assert xp.tolist(write.write_seed_slot_indices)[:2] == [20, 34]


def test_plan_h5_verify_only(xp):
    verify, write = make_plans(xp, 16, 8)
    _plan(xp, verify, write, [1], [6], [0], _linear_table(xp))
    assert _entries(xp, verify)[0] == list(range(16, 22))
    assert xp.tolist(write.write_offsets) == [0] * 9
    assert xp.tolist(write.write_seed_slot_indices)[:1] == [-1]


def _swa_table(xp):
    table = np.zeros((2, 256), np.int32)
    table[1] = 256 + np.arange(256)
    return xp.array(table, "int32")


def _swa_lut(xp):
    lut = np.arange(1025) - 200
    lut[:300] = 0
    return xp.array(lut)


def _swa_plan(xp, prefix):
    """Plans one request of `prefix` tokens with a 128-token window over the SWA table and LUT;
    returns the entries' slots, predecessors and positions and the write seeds."""
    verify, write = make_plans(xp, 256, 1)
    _plan(xp, verify, write, [1], [prefix], [1], _swa_table(xp), capacity=256,
          swa_window_size=128, full_to_swa_index_mapping=_swa_lut(xp))
    slots, prevs, positions, _ = _entries(xp, verify)
    return slots, prevs, positions, xp.tolist(write.write_seed_slot_indices)


def test_plan_l1_swa_window(xp):
    slots, prevs, positions, seeds = _swa_plan(xp, 200)
    assert len(slots) == 128
    assert (slots[0], prevs[0], positions[0]) == (128, 127, 72)
    assert (slots[-1], positions[-1]) == (255, 199)
    assert seeds == [255]


def test_plan_l2_evicted_slots_map_to_zero(xp):
    slots, prevs, positions, seeds = _swa_plan(xp, 100)
    assert len(slots) == 100
    assert slots[:44] == [0] * 44
    assert (slots[44], prevs[44], positions[44]) == (100, 0, 44)
    assert seeds == [155]


def test_plan_l3_lut_index_clamps(xp):
    verify, write = make_plans(xp, 16, 1)
    _plan(xp, verify, write, [1], [3], [1], _swa_table(xp),
          full_to_swa_index_mapping=xp.array(np.arange(1000, 1258)))
    slots, prevs, _, _ = _entries(xp, verify)
    assert slots == [1256, 1257, 1257]
    assert prevs == [-1, 1256, 1257]
    assert xp.tolist(write.write_seed_slot_indices) == [1257]


def test_plan_l4_column_clamps(xp):
    verify, write = make_plans(xp, 16, 1)
    table = xp.array([[0, 0, 0, 0], [10, 11, 12, 13]], "int32")
    _plan(xp, verify, write, [1], [6], [1], table)
    slots, prevs, _, _ = _entries(xp, verify)
    assert slots == [10, 11, 12, 13, 13, 13]
    assert prevs == [-1, 10, 11, 12, 13, 13]
    assert xp.tolist(write.write_seed_slot_indices) == [13]


def test_plan_l5_token_pool_with_offset(xp):
    verify, write = make_plans(xp, 16, 2)
    table = np.zeros((3, 8), np.int32)
    table[2] = np.arange(40, 48)
    pool = np.zeros((3, 8), np.int32)
    pool[2] = np.arange(100, 108)
    _plan(xp, verify, write, [0, 2], [9, 4], [3, 1], xp.array(table, "int32"),
          req_to_verify_expected_tokens=xp.array(pool, "int32"),
          req_to_verify_expected_tokens_valid_lens=xp.array([0, 4]),
          kv_token_id_vs_position_offset=1)
    slots, _, positions, tokens = _entries(xp, verify)
    assert slots == [40, 41, 42, 43]
    assert tokens == [101, 102, 103, -1]
    assert positions == [0, 1, 2, 3]
    assert xp.tolist(write.write_offsets) == [0, 0, 1]
    assert xp.tolist(write.write_seed_slot_indices) == [-1, 43]
    assert xp.tolist(write.write_num_valid_reqs) == [2]
