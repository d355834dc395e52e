"""Validation of the plan launchers through Python: a representative set of checks per op, each
raising ValueError (TypeError for a non-tensor) with the exact text and leaving every output
unchanged."""

import numpy as np
import pytest
from conftest import FakeTensor, assert_raises_unchanged, make_plans

import kvcanary


# launch_canary_plan_kernels ---------------------------------------------------------------------

class PlanCall:
    """A valid plan call (bs 1, table [2, 8], capacities 8 and 2) whose arguments a test breaks."""

    def __init__(self, xp):
        self.xp = xp
        self.verify, self.write = make_plans(xp, 8, 2)
        table = np.zeros((2, 8), np.int32)
        table[1] = np.arange(1, 9)
        self.kwargs = dict(
            verify_plan_out=self.verify, write_plan_out=self.write,
            req_pool_indices=xp.array([1]), prefix_lens=xp.array([3]),
            extend_seq_lens=xp.array([1]), req_to_token=xp.array(table, "int32"),
            swa_window_size=0, full_to_swa_index_mapping=None, verify_capacity=8,
            req_to_verify_expected_tokens=None, req_to_verify_expected_tokens_valid_lens=None,
            kv_token_id_vs_position_offset=0)

    def outputs(self):
        v, w = self.verify, self.write
        return [v.verify_slot_indices, v.verify_expected_tokens, v.verify_expected_positions,
                v.verify_prev_slot_indices, v.verify_num_valid, v.enable, w.write_offsets,
                w.write_seed_slot_indices, w.write_num_valid_reqs]

    def expect_error(self, message, **changes):
        kwargs = dict(self.kwargs, **changes)
        assert_raises_unchanged(self.xp, lambda: kvcanary.launch_canary_plan_kernels(**kwargs),
                                message, self.outputs())


def test_plan_valid_call_succeeds(xp):
    call = PlanCall(xp)
    kvcanary.launch_canary_plan_kernels(**call.kwargs)
    assert xp.tolist(call.verify.verify_num_valid) == [3]


def test_plan_wrong_dtype(xp):
    PlanCall(xp).expect_error(
        "kv-canary: req_pool_indices must have dtype torch.int64, got torch.int32",
        req_pool_indices=xp.array([1], "int32"))
    PlanCall(xp).expect_error(
        "kv-canary: req_to_token must have dtype torch.int32, got torch.int64",
        req_to_token=xp.zeros((2, 8), "int64"))


def test_plan_non_contiguous(xp):
    wide = xp.zeros((2, 16), "int32")
    PlanCall(xp).expect_error("kv-canary: req_to_token must be contiguous",
                              req_to_token=wide[:, ::2])
    PlanCall(xp).expect_error("kv-canary: prefix_lens must be contiguous",
                              prefix_lens=xp.array([3, 0, 3, 0])[::2])


def test_plan_wrong_length(xp):
    PlanCall(xp).expect_error("kv-canary: prefix_lens length must be 1, got 2",
                              prefix_lens=xp.array([3, 3]))
    PlanCall(xp).expect_error("kv-canary: req_to_token must be 2-D, got shape (16,)",
                              req_to_token=xp.zeros(16, "int32"))


def test_plan_capacity_mismatch_and_missing_lut(xp):
    PlanCall(xp).expect_error(
        "kv-canary: launch_canary_plan_kernels verify_capacity=9 does not match "
        "verify_plan_out.verify_slot_indices.shape[0]=8", verify_capacity=9)
    PlanCall(xp).expect_error(
        "kv-canary: launch_canary_plan_kernels requires full_to_swa_index_mapping when "
        "swa_window_size > 0", swa_window_size=4)
    PlanCall(xp).expect_error(
        "kv-canary: launch_plan_entries_kernel requires req_to_verify_expected_tokens_valid_lens "
        "when req_to_verify_expected_tokens is set",
        req_to_verify_expected_tokens=xp.zeros((2, 8), "int32"))


def test_plan_req_to_token_stride0_mismatch(xp):
    call = PlanCall(xp)
    call.expect_error("kv-canary: req_to_token_stride0=16 does not match req_to_token.stride(0)=8",
                      req_to_token_stride0=16)
    kvcanary.launch_canary_plan_kernels(**call.kwargs, req_to_token_stride0=8)  # the true pitch
    assert xp.tolist(call.verify.verify_num_valid) == [3]


def test_plan_wrong_device(xp):
    PlanCall(xp).expect_error(
        f"kv-canary: req_pool_indices must be on out_verify_slot_indices's device "
        f"{'cuda:0' if xp.name == 'cuda' else 'cpu'}, got cuda:7",
        req_pool_indices=FakeTensor([1], device_type=2, device_id=7))


def test_plan_read_only_output(xp):
    call = PlanCall(xp)
    read_only = FakeTensor([1], "int32", device_type=1, read_only=True)
    if xp.name == "cuda":
        pytest.skip("the fake read-only tensor lives on the host")
    call.write = kvcanary.WritePlan(call.write.write_offsets, call.write.write_seed_slot_indices,
                                    read_only)
    call.expect_error("kv-canary: out_write_num_valid_reqs must be writable",
                      write_plan_out=call.write)


def test_not_a_tensor_is_a_type_error(xp):
    call = PlanCall(xp)
    with pytest.raises(TypeError, match=r"^kv-canary: prefix_lens must be a tensor that supports "
                                        r"DLPack \(__dlpack__\), got list$"):
        kvcanary.launch_canary_plan_kernels(**dict(call.kwargs, prefix_lens=[3]))


# launch_plan_offsets_kernel / launch_plan_entries_kernel / launch_swa_translate_kernel ----------

def _offsets_kwargs(xp, scratch_len=4097):
    table = np.zeros((2, 8), np.int32)
    table[1] = np.arange(1, 9)
    return dict(req_pool_indices=xp.array([1]), prefix_lens=xp.array([3]),
                extend_seq_lens=xp.array([1]), req_to_token=xp.array(table, "int32"),
                full_to_swa_index_mapping=None,
                out_verify_offsets_scratch=xp.zeros(scratch_len),
                out_write_offsets=xp.zeros(3), out_write_seed_slot_indices=xp.zeros(2),
                out_verify_num_valid=xp.zeros(1, "int32"), out_verify_enable=xp.zeros(1, "int32"),
                out_write_num_valid_reqs=xp.zeros(1, "int32"), swa_window_size=0,
                verify_capacity=8)


def _offsets_outputs(kwargs):
    return [kwargs[k] for k in kwargs if k.startswith("out_")]


def test_plan_offsets_checks(xp):
    cases = [
        (dict(out_verify_offsets_scratch=xp.zeros(10)),
         "kv-canary: out_verify_offsets_scratch length must be >= 4097, got 10"),
        (dict(req_to_token_stride0=9),
         "kv-canary: req_to_token_stride0=9 does not match req_to_token.stride(0)=8"),
        (dict(lut_len=3), "kv-canary: lut_len must be 0 when has_swa_lut is False"),
        (dict(full_to_swa_index_mapping=xp.zeros(4), lut_len=0),
         "kv-canary: lut_len must be positive when has_swa_lut is True"),
        (dict(out_write_seed_slot_indices=xp.zeros(3)),
         "kv-canary: write_offsets_len must equal write_req_capacity + 1, got 3 and 3"),
        (dict(out_verify_enable=xp.zeros(1)),
         "kv-canary: out_verify_enable must have dtype torch.int32, got torch.int64"),
        (dict(req_pool_indices=xp.zeros(4097), prefix_lens=xp.zeros(4097),
              extend_seq_lens=xp.zeros(4097)),
         "kv-canary: offsets kernel bs must be in [0, 4096], got 4097"),
    ]
    for changes, message in cases:
        kwargs = dict(_offsets_kwargs(xp), **changes)
        assert_raises_unchanged(xp, lambda: kvcanary.launch_plan_offsets_kernel(**kwargs),
                                message, _offsets_outputs(kwargs))


def _entries_kwargs(xp):
    return dict(req_pool_indices=xp.array([1]), prefix_lens=xp.array([3]),
                req_to_token=xp.zeros((2, 8), "int32"), full_to_swa_index_mapping=None,
                verify_offsets_scratch=xp.array([0, 3]), verify_enable=xp.full(1, 1, "int32"),
                req_to_verify_expected_tokens=None, req_to_verify_expected_tokens_valid_lens=None,
                out_verify_slot_indices=xp.zeros(8), out_verify_expected_tokens=xp.zeros(8),
                out_verify_expected_positions=xp.zeros(8), out_verify_prev_slot_indices=xp.zeros(8),
                kv_token_id_vs_position_offset=0, swa_window_size=0)


def test_plan_entries_checks(xp):
    cases = [
        (dict(req_to_verify_expected_tokens=xp.zeros((2, 8), "int32")),
         "kv-canary: launch_plan_entries_kernel requires req_to_verify_expected_tokens_valid_lens "
         "when req_to_verify_expected_tokens is set"),
        (dict(verify_offsets_scratch=xp.array([0])),
         "kv-canary: verify_offsets_scratch length must be >= bs_padded + 1"),
        (dict(out_verify_prev_slot_indices=xp.zeros(7)),
         "kv-canary: out_verify_prev_slot_indices length must be 8, got 7"),
    ]
    for changes, message in cases:
        kwargs = dict(_entries_kwargs(xp), **changes)
        outputs = [kwargs[k] for k in kwargs if k.startswith("out_")]
        assert_raises_unchanged(xp, lambda: kvcanary.launch_plan_entries_kernel(**kwargs),
                                message, outputs)


def test_swa_translate_checks(xp):
    out = xp.full(3, 5)
    assert_raises_unchanged(
        xp, lambda: kvcanary.launch_swa_translate_kernel(
            slot_indices=xp.array([1, 2, 3]), full_to_swa_index_mapping=xp.array([7, 8]),
            out_slot_indices=out[:2]),
        "kv-canary: out_slot_indices length must be 3, got 2", [out])
    assert_raises_unchanged(
        xp, lambda: kvcanary.launch_swa_translate_kernel(
            slot_indices=xp.array([1, 2, 3], "int32"), full_to_swa_index_mapping=xp.array([7]),
            out_slot_indices=out),
        "kv-canary: slot_indices must have dtype torch.int64, got torch.int32", [out])
