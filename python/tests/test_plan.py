"""The plan's two stage launchers against the fused one, SWA translation, and scatter."""

import numpy as np
from conftest import make_plans

import kvcanary


def _batch(xp):
    rng = np.random.default_rng(3)
    table = rng.permutation(np.arange(1, 1 + 5 * 40)).reshape(5, 40).astype(np.int32)
    pool = rng.integers(0, 1000, size=(5, 40)).astype(np.int32)
    return dict(req_pool_indices=xp.array([3, 0, 1, 4, 2]), prefix_lens=xp.array([9, 4, 0, 30, 17]),
                req_to_token=xp.array(table, "int32"),
                full_to_swa_index_mapping=xp.array(np.arange(300)[::-1].copy()),
                req_to_verify_expected_tokens=xp.array(pool, "int32"),
                req_to_verify_expected_tokens_valid_lens=xp.array([9, 0, 0, 25, 40]),
                kv_token_id_vs_position_offset=1, swa_window_size=12)


def test_stages_equal_the_fused_plan(xp):
    batch = _batch(xp)
    extend = xp.array([1, 2, 5, 0, 3])
    fused_v, fused_w = make_plans(xp, 64, 6)
    kvcanary.launch_canary_plan_kernels(verify_plan_out=fused_v, write_plan_out=fused_w,
                                        extend_seq_lens=extend, verify_capacity=64, **batch)
    stage_v, stage_w = make_plans(xp, 64, 6)
    stage_v.zero_for_testing_()
    stage_w.zero_for_testing_()
    scratch = xp.zeros(4097)
    kvcanary.launch_plan_offsets_kernel(
        req_pool_indices=batch["req_pool_indices"], prefix_lens=batch["prefix_lens"],
        extend_seq_lens=extend, req_to_token=batch["req_to_token"],
        full_to_swa_index_mapping=batch["full_to_swa_index_mapping"],
        out_verify_offsets_scratch=scratch, out_write_offsets=stage_w.write_offsets,
        out_write_seed_slot_indices=stage_w.write_seed_slot_indices,
        out_verify_num_valid=stage_v.verify_num_valid, out_verify_enable=stage_v.enable,
        out_write_num_valid_reqs=stage_w.write_num_valid_reqs, swa_window_size=12,
        verify_capacity=64)
    kvcanary.launch_plan_entries_kernel(
        verify_offsets_scratch=scratch, verify_enable=stage_v.enable,
        out_verify_slot_indices=stage_v.verify_slot_indices,
        out_verify_expected_tokens=stage_v.verify_expected_tokens,
        out_verify_expected_positions=stage_v.verify_expected_positions,
        out_verify_prev_slot_indices=stage_v.verify_prev_slot_indices,
        **{k: v for k, v in batch.items() if k not in ("extend_seq_lens",)})
    n = xp.tolist(fused_v.verify_num_valid)[0]
    assert n == 9 + 12 + 12 > 0 and xp.tolist(stage_v.verify_num_valid) == [n]
    assert xp.tolist(scratch)[:6] == [0, 9, 9, 9, 21, 33]
    for field in ("verify_slot_indices", "verify_expected_tokens", "verify_expected_positions",
                  "verify_prev_slot_indices"):
        assert xp.tolist(getattr(stage_v, field))[:n] == xp.tolist(getattr(fused_v, field))[:n]
    for field in ("write_offsets", "write_seed_slot_indices", "write_num_valid_reqs"):
        assert xp.tolist(getattr(stage_w, field)) == xp.tolist(getattr(fused_w, field))
    assert xp.tolist(fused_w.write_offsets) == [0, 1, 1, 6, 6, 9, 0]


def test_swa_translate(xp):
    lut = xp.array([10, 20, 30])
    slots = xp.array([2, -1, 0, 7, 1])
    out = xp.zeros(5)
    kvcanary.launch_swa_translate_kernel(slot_indices=slots, full_to_swa_index_mapping=lut,
                                         out_slot_indices=out)
    assert xp.tolist(out) == [30, -1, 10, 30, 20]
    kvcanary.launch_swa_translate_kernel(slot_indices=slots, full_to_swa_index_mapping=lut,
                                         out_slot_indices=slots)  # in place
    assert xp.tolist(slots) == [30, -1, 10, 30, 20]


def test_scatter_keeps_stale_tails_and_skips_bad_rows(xp):
    pool = xp.full((3, 4), 7, "int32")
    kvcanary.launch_scatter_req_token_ids_kernel(
        flat_in=xp.array([1, 2, 3, -1, 5, 6, 7, 8, (1 << 32) + 9]),
        offsets=xp.array([0, 2, 3, 8, 9]), req_pool_indices=xp.array([2, 5, 1, 0]),
        pool_out=pool)
    assert xp.tolist(pool) == [[9, 7, 7, 7], [-1, 5, 6, 7], [1, 2, 7, 7]]


def test_scatter_honours_a_strided_pool(xp):
    wide = xp.zeros((2, 8), "int32")
    kvcanary.launch_scatter_req_token_ids_kernel(
        flat_in=xp.array([4, 5]), offsets=xp.array([0, 2]), req_pool_indices=xp.array([1]),
        pool_out=wide[:, 2:6])
    assert xp.tolist(wide) == [[0] * 8, [0, 0, 4, 5, 0, 0, 0, 0]]
