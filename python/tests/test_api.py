"""The shape of the Python API: SGLang's submodules and names, keyword-only
launchers, frozen dataclasses, plan allocation, stream choice, docstrings."""

import dataclasses
import inspect

import numpy as np
import pytest
from conftest import HAVE_TORCH, State, make_plans

import kvcanary
from kvcanary._launch import resolve_stream

LAUNCHERS = [
    kvcanary.launch_canary_plan_kernels, kvcanary.launch_plan_offsets_kernel,
    kvcanary.launch_plan_entries_kernel, kvcanary.launch_canary_verify_kernel,
    kvcanary.launch_canary_write_kernel, kvcanary.launch_scatter_req_token_ids_kernel,
    kvcanary.launch_swa_translate_kernel,
]

SGLANG_KEYWORDS = {
    "launch_canary_plan_kernels": [
        "verify_plan_out", "write_plan_out", "req_pool_indices", "prefix_lens", "extend_seq_lens",
        "req_to_token", "swa_window_size", "full_to_swa_index_mapping", "verify_capacity",
        "req_to_verify_expected_tokens", "req_to_verify_expected_tokens_valid_lens",
        "kv_token_id_vs_position_offset"],
    "launch_plan_offsets_kernel": [
        "req_pool_indices", "prefix_lens", "extend_seq_lens", "req_to_token",
        "full_to_swa_index_mapping", "out_verify_offsets_scratch", "out_write_offsets",
        "out_write_seed_slot_indices", "out_verify_num_valid", "out_verify_enable",
        "out_write_num_valid_reqs", "swa_window_size", "verify_capacity"],
    "launch_plan_entries_kernel": [
        "req_pool_indices", "prefix_lens", "req_to_token", "full_to_swa_index_mapping",
        "verify_offsets_scratch", "verify_enable", "req_to_verify_expected_tokens",
        "req_to_verify_expected_tokens_valid_lens", "out_verify_slot_indices",
        "out_verify_expected_tokens", "out_verify_expected_positions",
        "out_verify_prev_slot_indices", "kv_token_id_vs_position_offset", "swa_window_size"],
    "launch_canary_verify_kernel": ["context", "plan", "check_verify_expected_token"],
    "launch_canary_write_kernel": [
        "context", "plan", "input_ids", "positions", "out_cache_loc", "enable_write_input_assert",
        "expected_input_tokens", "expected_input_positions"],
    "launch_scatter_req_token_ids_kernel": ["flat_in", "offsets", "req_pool_indices", "pool_out"],
    "launch_swa_translate_kernel": ["slot_indices", "full_to_swa_index_mapping", "out_slot_indices"],
}


def test_sglang_submodules_resolve():
    from kvcanary.consts import CANARY_CHAIN_ANCHOR, FailReason, RealKvHashMode, splitmix64  # noqa
    from kvcanary.plan import launch_canary_plan_kernels
    from kvcanary.plan.entries_kernel import launch_plan_entries_kernel
    from kvcanary.plan.offsets_kernel import _PLAN_BS_BLOCK_SIZE, launch_plan_offsets_kernel
    from kvcanary.scatter_req_token_ids import launch_scatter_req_token_ids_kernel
    from kvcanary.verify import (CANARY_SLOT_BYTES, CanaryLaunchTag, RealKvSource,  # noqa
                                 VerifyOrWriteContext, VerifyPlan, launch_canary_verify_kernel)
    from kvcanary.write import WritePlan, launch_canary_write_kernel

    assert launch_canary_plan_kernels is kvcanary.launch_canary_plan_kernels
    assert launch_plan_entries_kernel is kvcanary.launch_plan_entries_kernel
    assert launch_plan_offsets_kernel is kvcanary.launch_plan_offsets_kernel
    assert launch_scatter_req_token_ids_kernel is kvcanary.launch_scatter_req_token_ids_kernel
    assert launch_canary_verify_kernel is kvcanary.launch_canary_verify_kernel
    assert launch_canary_write_kernel is kvcanary.launch_canary_write_kernel
    assert (WritePlan, VerifyPlan) == (kvcanary.WritePlan, kvcanary.VerifyPlan)
    assert _PLAN_BS_BLOCK_SIZE == 4096 and CANARY_SLOT_BYTES == 32
    assert set(kvcanary.__all__) <= set(dir(kvcanary))


@pytest.mark.parametrize("launcher", LAUNCHERS, ids=lambda f: f.__name__)
def test_launchers_are_keyword_only_supersets_of_sglang(launcher):
    parameters = inspect.signature(launcher).parameters
    assert all(p.kind is inspect.Parameter.KEYWORD_ONLY for p in parameters.values())
    assert list(parameters)[:len(SGLANG_KEYWORDS[launcher.__name__])] == \
        SGLANG_KEYWORDS[launcher.__name__]
    assert "stream" in parameters
    with pytest.raises(TypeError):
        launcher(None)
    assert launcher.__doc__ and len(launcher.__doc__.splitlines()) > 5


@pytest.mark.parametrize("obj", [
    kvcanary.VerifyPlan, kvcanary.WritePlan, kvcanary.RealKvSource,
    kvcanary.VerifyOrWriteContext, kvcanary.FailReason, kvcanary.RealKvHashMode,
    kvcanary.CanaryLaunchTag, kvcanary.splitmix64, kvcanary.splitmix64_mix3,
    kvcanary.compute_slot_hash, kvcanary.real_kv_hash, kvcanary.to_signed_int64,
    kvcanary.format_violation, kvcanary.VerifyPlan.allocate, kvcanary.WritePlan.allocate,
    kvcanary.VerifyPlan.allocation_bytes, kvcanary.WritePlan.zero_for_testing_,
], ids=lambda o: o.__qualname__)
def test_public_names_have_docstrings(obj):
    assert obj.__doc__ and obj.__doc__.strip()


def test_dataclasses_are_frozen_with_sglang_fields(host_xp):
    state = State(host_xp, 4)
    context = state.context()
    assert [f.name for f in dataclasses.fields(kvcanary.VerifyOrWriteContext)] == [
        "canary_buf", "kernel_kind", "violation_ring", "violation_write_index",
        "slot_run_counter", "kernel_run_counter", "real_kv_sources", "real_kv_hash_mode",
        "enable_chain_position_assert"]
    with pytest.raises(dataclasses.FrozenInstanceError):
        context.kernel_kind = 3
    with pytest.raises(TypeError):
        kvcanary.VerifyOrWriteContext(state.canary, 2)  # keyword-only, as in SGLang
    verify, write = make_plans(host_xp, 2, 2)
    assert [f.name for f in dataclasses.fields(verify)] == [
        "verify_slot_indices", "verify_expected_tokens", "verify_expected_positions",
        "verify_prev_slot_indices", "verify_num_valid", "enable"]
    assert [f.name for f in dataclasses.fields(write)] == [
        "write_offsets", "write_seed_slot_indices", "write_num_valid_reqs"]
    with pytest.raises(dataclasses.FrozenInstanceError):
        verify.enable = None
    source = kvcanary.RealKvSource(host_xp.zeros((2, 16), "uint8"), 1, 16, 16)
    assert source == kvcanary.RealKvSource(tensor=source.tensor, page_size=1,
                                           num_bytes_per_token=16, read_bytes=16)


@pytest.mark.skipif(not HAVE_TORCH, reason="allocate returns torch tensors")
def test_allocate_and_zero_for_testing():
    import torch

    verify = kvcanary.VerifyPlan.allocate(verify_capacity=5, device="cpu")
    assert [(t.dtype, tuple(t.shape)) for t in dataclasses.astuple(verify)] == [
        (torch.int64, (5,))] * 4 + [(torch.int32, (1,))] * 2
    assert verify.enable.tolist() == [1]
    assert kvcanary.VerifyPlan.allocation_bytes(5) == 4 * 5 * 8 + 2 * 4
    assert sum(t.numel() * t.element_size() for t in dataclasses.astuple(verify)) == \
        kvcanary.VerifyPlan.allocation_bytes(5)
    verify.verify_slot_indices.fill_(9)
    assert verify.zero_for_testing_() is verify
    assert verify.verify_slot_indices.tolist() == [0] * 5
    assert verify.verify_expected_tokens.tolist() == [-1] * 5
    assert verify.enable.tolist() == [0]

    write = kvcanary.WritePlan.allocate(3, torch.device("cpu"))
    assert [tuple(t.shape) for t in dataclasses.astuple(write)] == [(4,), (3,), (1,)]
    assert kvcanary.WritePlan.allocation_bytes(3) == (2 * 3 + 1) * 8 + 4
    write.write_seed_slot_indices.fill_(-1)
    assert write.zero_for_testing_().write_seed_slot_indices.tolist() == [0, 0, 0]


def test_zero_for_testing_on_numpy_plans():
    verify, write = make_plans(__import__("conftest").Backend("numpy"), 3, 2)
    verify.verify_prev_slot_indices[:] = 4
    verify.zero_for_testing_()
    assert verify.verify_prev_slot_indices.tolist() == [0, 0, 0]
    assert verify.verify_expected_tokens.tolist() == [-1, -1, -1]
    write.write_offsets[:] = 2
    assert write.zero_for_testing_().write_offsets.tolist() == [0, 0, 0]


def test_kernel_kind_accepts_an_int_and_stream_is_ignored_on_cpu(host_xp):
    state = State(host_xp, 4)
    verify, _ = make_plans(host_xp, 2, 1)
    verify.verify_slot_indices[0] = 2
    verify.verify_prev_slot_indices[0] = -1
    verify.verify_num_valid[0] = 1
    kvcanary.launch_canary_verify_kernel(context=state.context(tag=11), plan=verify,
                                         check_verify_expected_token=False, stream=12345)
    assert state.rows()[0][:2] == [11, 2]


def test_paired_verify_equals_two_launches(host_xp):
    state_k, state_v = State(host_xp, 4), State(host_xp, 4)
    verify, _ = make_plans(host_xp, 2, 1)
    verify.verify_slot_indices[0] = 3
    verify.verify_prev_slot_indices[0] = -1
    verify.verify_num_valid[0] = 1
    kvcanary.launch_canary_verify_kernel(
        context=state_k.context(tag=2), plan=verify,
        paired_context=state_v.context(tag=3, violation_ring=state_k.ring,
                                       violation_write_index=state_k.write_index))
    assert [row[:2] for row in state_k.rows()] == [[2, 3], [3, 3]]
    assert state_k.counters() == (1, 1) and state_v.counters() == (1, 1)


def test_resolve_stream():
    class Stream:
        cuda_stream = 77

    array = np.zeros(2)
    assert resolve_stream(None, array) == 0
    assert resolve_stream(5, array) == 5
    assert resolve_stream(Stream(), array) == 77
    if HAVE_TORCH:
        import torch

        assert resolve_stream(None, torch.zeros(2)) == 0
