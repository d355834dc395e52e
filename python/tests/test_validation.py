"""Validation through the Python launchers (spec/kernels.md §11): a representative set of checks
per op, each raising ValueError with the exact text and leaving every output unchanged."""

import numpy as np
import pytest
from conftest import FakeTensor, State, assert_raises_unchanged, make_plans

import kvcanary
from kvcanary import RealKvHashMode, RealKvSource

TAIL = int(kvcanary.CanaryLaunchTag.TAIL_K_FULL)


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


# launch_canary_verify_kernel --------------------------------------------------------------------

def _verify_setup(xp):
    state = State(xp, 8, ring_capacity=4)
    verify, _ = make_plans(xp, 4, 1)
    verify.verify_slot_indices[0] = 3  # a never-written slot: a valid call records a row
    verify.verify_prev_slot_indices[0] = -1
    verify.verify_num_valid[0] = 1
    return state, verify


def _state_outputs(state):
    return [state.canary, state.ring, state.write_index, state.slot_run_counter,
            state.kernel_run_counter]


def test_verify_valid_call_records_a_row(xp):
    state, plan = _verify_setup(xp)
    kvcanary.launch_canary_verify_kernel(context=state.context(), plan=plan,
                                         check_verify_expected_token=False)
    assert len(state.rows()) == 1 and state.counters() == (1, 1)


def test_verify_checks(xp):
    state, plan = _verify_setup(xp)
    fake_cuda = FakeTensor([4, 8], device_type=2, device_id=3)
    src = RealKvSource(xp.zeros((8, 16), "uint8"), 1, 16, 16)
    cases = [
        (dict(canary_buf=xp.zeros((8, 32))),
         "kv-canary: canary_buf must have dtype torch.uint8, got torch.int64"),
        (dict(canary_buf=xp.zeros((8, 16), "uint8")),
         "kv-canary: canary_verify: slot_stride_bytes must hold at least 32 bytes per slot, got 16"),
        (dict(violation_ring=xp.zeros((4, 7))),
         "kv-canary: violation_ring must have 8 columns, got shape (4, 7)"),
        (dict(violation_write_index=xp.zeros(1)),
         "kv-canary: violation_write_index must have dtype torch.int32, got torch.int64"),
        (dict(slot_run_counter=xp.zeros(2)), "kv-canary: slot_run_counter length must be 1, got 2"),
        (dict(real_kv_sources=(src,) * 5),
         "kv-canary: at most 4 RealKvSource entries supported by the CUDA ABI, got 5"),
        (dict(real_kv_hash_mode=7), "kv-canary: real_kv_hash_mode must be one of 0/1/2, got 7"),
        (dict(violation_ring=fake_cuda),
         f"kv-canary: violation_ring must be on canary_buf's device "
         f"{'cuda:0' if xp.name == 'cuda' else 'cpu'}, got cuda:3"),
    ]
    for changes, message in cases:
        context = state.context(**changes)
        assert_raises_unchanged(
            xp, lambda: kvcanary.launch_canary_verify_kernel(
                context=context, plan=plan, check_verify_expected_token=False),
            message, _state_outputs(state))
    bad_plan = kvcanary.VerifyPlan(xp.zeros(8)[::2], plan.verify_expected_tokens,
                                   plan.verify_expected_positions, plan.verify_prev_slot_indices,
                                   plan.verify_num_valid, plan.enable)
    assert_raises_unchanged(
        xp, lambda: kvcanary.launch_canary_verify_kernel(
            context=state.context(), plan=bad_plan, check_verify_expected_token=False),
        "kv-canary: plan.verify_slot_indices must be contiguous", _state_outputs(state))
    short_plan = kvcanary.VerifyPlan(plan.verify_slot_indices, plan.verify_expected_tokens,
                                     xp.zeros(3), plan.verify_prev_slot_indices,
                                     plan.verify_num_valid, plan.enable)
    assert_raises_unchanged(
        xp, lambda: kvcanary.launch_canary_verify_kernel(
            context=state.context(), plan=short_plan, check_verify_expected_token=False),
        "kv-canary: plan.verify_expected_positions length must be 4, got 3", _state_outputs(state))


def test_unsupported_device_is_refused(xp):
    if xp.name == "cuda":
        pytest.skip("needs a reference tensor on a device no backend serves")
    state, plan = _verify_setup(xp)
    opencl = FakeTensor([8, 32], "uint8", device_type=4, device_id=0)
    with pytest.raises(ValueError) as excinfo:
        kvcanary.launch_canary_verify_kernel(
            context=state.context(canary_buf=opencl, violation_ring=FakeTensor([4, 8], "int64", 4),
                                  violation_write_index=FakeTensor([1], "int32", 4),
                                  slot_run_counter=FakeTensor([1], "int64", 4),
                                  kernel_run_counter=FakeTensor([1], "int64", 4)),
            plan=kvcanary.VerifyPlan(*(FakeTensor([4], "int64", 4) for _ in range(4)),
                                     FakeTensor([1], "int32", 4), FakeTensor([1], "int32", 4)),
            check_verify_expected_token=False)
    assert str(excinfo.value) == "kv-canary: canary_buf is on unsupported device dlpack_device_4:0"


# launch_canary_write_kernel ---------------------------------------------------------------------

def _write_setup(xp):
    state = State(xp, 8, ring_capacity=4)
    _, plan = make_plans(xp, 1, 4)
    plan.write_offsets[1] = 3
    plan.write_seed_slot_indices[0] = -1
    plan.write_num_valid_reqs[0] = 1
    kwargs = dict(context=state.context(), plan=plan, input_ids=xp.array([5, 6, 7]),
                  positions=xp.array([0, 1, 2]), out_cache_loc=xp.array([1, 2, 3]),
                  enable_write_input_assert=False, expected_input_tokens=None,
                  expected_input_positions=None)
    return state, kwargs


def test_write_valid_call_writes(xp):
    state, kwargs = _write_setup(xp)
    kvcanary.launch_canary_write_kernel(**kwargs)
    assert state.record(3)[:2] == [7, 2] and state.counters() == (1, 3)


def test_write_checks(xp):
    state, base = _write_setup(xp)
    plan = base["plan"]
    cases = [
        (dict(enable_write_input_assert=True),
         "kv-canary: expected input tensors are required when enable_write_input_assert=True"),
        (dict(expected_input_tokens=xp.array([5, 6, 7])),
         "kv-canary: expected input tensors must be None when enable_write_input_assert=False"),
        (dict(input_ids=xp.array([5, 6, 7], "int32")),
         "kv-canary: input_ids must have dtype torch.int64, got torch.int32"),
        (dict(positions=xp.array([0, 1])), "kv-canary: positions length must be 3, got 2"),
        (dict(out_cache_loc=xp.array([1, 0, 2, 0, 3, 0])[::2]),
         "kv-canary: out_cache_loc must be contiguous"),
        (dict(plan=kvcanary.WritePlan(xp.zeros(4), plan.write_seed_slot_indices,
                                      plan.write_num_valid_reqs)),
         "kv-canary: canary_write: write_offsets.size(0) must equal write_req_capacity + 1 (5), "
         "got 4"),
        (dict(context=state.context(enable_chain_position_assert=xp.zeros(1))),
         "kv-canary: enable_chain_position_assert must have dtype torch.int32, got torch.int64"),
        (dict(context=state.context(canary_buf=xp.zeros((8, 24), "uint8"))),
         "kv-canary: canary_write: slot_stride_bytes must hold at least 32 bytes per slot, got 24"),
    ]
    for changes, message in cases:
        kwargs = dict(base, **changes)
        assert_raises_unchanged(xp, lambda: kvcanary.launch_canary_write_kernel(**kwargs),
                                message, _state_outputs(state))


# launch_scatter_req_token_ids_kernel ------------------------------------------------------------

def test_scatter_checks(xp):
    pool = xp.full((3, 4), 9, "int32")
    base = dict(flat_in=xp.array([1, 2]), offsets=xp.array([0, 2]), req_pool_indices=xp.array([1]),
                pool_out=pool)
    rank = dict(base, flat_in=xp.zeros((2, 1)))
    assert_raises_unchanged(
        xp, lambda: kvcanary.launch_scatter_req_token_ids_kernel(**rank),
        "kv-canary: scatter_req_token_ids flat_in must be 1-D, got shape (2, 1)", [pool])
    length = dict(base, offsets=xp.array([0, 1, 2]))
    assert_raises_unchanged(
        xp, lambda: kvcanary.launch_scatter_req_token_ids_kernel(**length),
        "kv-canary: scatter_req_token_ids offsets length 3 != bs+1 (2)", [pool])
    for changes, message in [
        (dict(offsets=xp.array([0, 2], "int32")),
         "kv-canary: scatter_req_token_ids offsets must be int64, got torch.int32"),
        (dict(pool_out=xp.zeros((3, 4))),
         "kv-canary: scatter_req_token_ids pool_out must be int32, got torch.int64"),
    ]:
        kwargs = dict(base, **changes)
        for error in (kvcanary.KvCanaryTypeError, TypeError, ValueError):
            assert_raises_unchanged(
                xp, lambda: kvcanary.launch_scatter_req_token_ids_kernel(**kwargs), message,
                [pool, kwargs["pool_out"]], error=error)


# RealKvSource and plan allocation ---------------------------------------------------------------

def test_real_kv_source_checks(host_xp):
    xp = host_xp
    kv = xp.zeros((4, 64), "uint8")
    cases = [
        ((kv, 0, 16, 16), "kv-canary: RealKvSource.page_size must be >= 1, got 0"),
        ((kv, 1, 24, 16),
         "kv-canary: RealKvSource.num_bytes_per_token must be a positive multiple of 16, got 24"),
        ((kv, 1, 32, 48), "kv-canary: RealKvSource.read_bytes must be a positive multiple of 16 "
                          "in (0, num_bytes_per_token=32], got 48"),
        ((xp.zeros(64, "uint8"), 1, 16, 16),
         "kv-canary: RealKvSource.tensor must be at least 2-D, got shape (64,)"),
        ((xp.zeros((4, 3), "float32"), 1, 16, 16),
         "kv-canary: RealKvSource.tensor row stride must be a multiple of 16 bytes, got 12 bytes "
         "(shape=(4, 3), strides=(3, 1), dtype=torch.float32)"),
        ((kv, 4, 32, 32), "kv-canary: RealKvSource row is too narrow for its slot layout: dim-1 is "
                          "64 bytes but page_size=4 x num_bytes_per_token=32 needs 128"),
    ]
    for args, message in cases:
        with pytest.raises(ValueError) as excinfo:
            RealKvSource(*args)
        assert str(excinfo.value) == message
    flat = xp.zeros(80, "uint8")
    with pytest.raises(ValueError, match=r"^kv-canary: RealKvSource\.tensor data pointer must be "
                                         r"16-byte aligned, got 0x[0-9a-f]+$"):
        RealKvSource(flat[1:65].reshape(4, 16), 1, 16, 16)


def test_plan_allocation_checks():
    for call, message in [
        (lambda: kvcanary.VerifyPlan.allocation_bytes(0),
         "kv-canary: VerifyPlan verify_capacity must be positive, got 0"),
        (lambda: kvcanary.VerifyPlan.allocate(-3, "cpu"),
         "kv-canary: VerifyPlan verify_capacity must be positive, got -3"),
        (lambda: kvcanary.VerifyPlan.allocate(verify_capacity=2**31, device="cpu"),
         "kv-canary: VerifyPlan verify_capacity must be <= 2147483647, got 2147483648"),
        (lambda: kvcanary.WritePlan.allocate(0, "cpu"),
         "kv-canary: WritePlan write_req_capacity must be positive, got 0"),
        (lambda: kvcanary.WritePlan.allocation_bytes(2**31),
         "kv-canary: WritePlan write_req_capacity must be <= 2147483647, got 2147483648"),
    ]:
        with pytest.raises(ValueError) as excinfo:
            call()
        assert str(excinfo.value) == message
