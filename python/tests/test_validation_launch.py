"""Validation of the verify, write and scatter launchers and RealKvSource through Python: a
representative set of checks per op, each raising ValueError with the exact text and leaving every
output unchanged."""

import pytest
from conftest import FakeTensor, State, assert_raises_unchanged, make_plans

import kvcanary
from kvcanary import RealKvSource


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
