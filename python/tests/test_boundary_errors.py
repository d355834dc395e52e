"""The Python boundary's error contract: every rejection is a ValueError whose text starts with
``kv-canary:`` and names the argument; type problems (a non-tensor, a missing attribute, a
scalar of the wrong type) are ``KvCanaryTypeError``, a ValueError that is also a TypeError. A
rejected call changes nothing. Valid but unusual tensors (read-only inputs, empty tensors,
size-1 dimensions with any stride) are accepted."""

import numpy as np
import pytest
from conftest import HAVE_TORCH, Backend, State, assert_raises_unchanged, make_plans, torch

import kvcanary
from kvcanary import KvCanaryTypeError

needs_torch = pytest.mark.skipif(not HAVE_TORCH, reason="no torch")


def _swa(slot_indices, lut, out):
    return lambda: kvcanary.launch_swa_translate_kernel(
        slot_indices=slot_indices, full_to_swa_index_mapping=lut, out_slot_indices=out)


def _read_only(array):
    array = array.copy()
    array.flags.writeable = False
    return array


def _verify_setup(host_xp):
    state = State(host_xp, 8)
    verify, _ = make_plans(host_xp, 4, 1)
    return state, verify


def _plan_call(host_xp, **overrides):
    verify, write = make_plans(host_xp, 4, 2)
    empty = host_xp.zeros(0)
    kwargs = dict(verify_plan_out=verify, write_plan_out=write, req_pool_indices=empty,
                  prefix_lens=empty, extend_seq_lens=empty,
                  req_to_token=host_xp.zeros((2, 2), "int32"), verify_capacity=4)
    kwargs.update(overrides)
    return (lambda: kvcanary.launch_canary_plan_kernels(**kwargs)), [verify.verify_num_valid,
                                                                      write.write_offsets]


# (a) exception types -----------------------------------------------------------------------------

def test_read_only_numpy_output_raises_value_error_not_buffer_error():
    out = _read_only(np.zeros(4, np.int64))
    with pytest.raises(ValueError) as excinfo:
        _swa(np.arange(4), np.arange(10), out)()
    assert type(excinfo.value) is ValueError
    assert str(excinfo.value) == "kv-canary: out_slot_indices must be writable"
    assert out.tolist() == [0, 0, 0, 0]


def test_read_only_numpy_inputs_are_accepted():
    out = np.zeros(4, np.int64)
    _swa(_read_only(np.arange(4)), _read_only(np.arange(10) * 2), out)()
    assert out.tolist() == [0, 2, 4, 6]


@pytest.mark.parametrize("make", [
    lambda: np.zeros(4, bool),
    pytest.param(lambda: torch.zeros(4, dtype=torch.bool), marks=needs_torch),
], ids=["numpy", "torch"])
def test_bool_tensor_raises_the_ops_dtype_error(make):
    out = np.zeros(4, np.int64)
    assert_raises_unchanged(
        Backend("numpy"), _swa(make(), np.arange(10), out),
        "kv-canary: slot_indices must have dtype torch.int64, got torch.bool", [out])


@pytest.mark.parametrize("context, plan, message", [
    (None, "plan", "kv-canary: context must have attribute canary_buf, got None"),
    ("context", object(), "kv-canary: plan must have attribute verify_slot_indices, got object"),
])
def test_missing_attributes_raise_kv_canary_type_error(host_xp, context, plan, message):
    state, verify = _verify_setup(host_xp)
    context = state.context() if context == "context" else context
    plan = verify if plan == "plan" else plan
    assert_raises_unchanged(
        host_xp, lambda: kvcanary.launch_canary_verify_kernel(context=context, plan=plan),
        message, [state.ring, state.kernel_run_counter], KvCanaryTypeError)


@pytest.mark.parametrize("overrides, message", [
    (dict(tag="3"), "kv-canary: kernel_kind must be an int, got str"),
    (dict(mode=1.0), "kv-canary: real_kv_hash_mode must be an int, got float"),
    (dict(real_kv_sources="ab"),
     "kv-canary: real_kv_sources must be a tuple of RealKvSource, got str"),
])
def test_context_scalars_of_the_wrong_type_raise_kv_canary_type_error(host_xp, overrides,
                                                                       message):
    state, verify = _verify_setup(host_xp)
    context = state.context(**overrides)
    assert_raises_unchanged(
        host_xp, lambda: kvcanary.launch_canary_verify_kernel(context=context, plan=verify),
        message, [state.ring, state.kernel_run_counter], KvCanaryTypeError)


def test_non_tensor_raises_kv_canary_type_error():
    out = np.zeros(2, np.int64)
    with pytest.raises(KvCanaryTypeError, match=r"^kv-canary: slot_indices must be a tensor"):
        _swa([1, 2], np.arange(10), out)()
    assert issubclass(KvCanaryTypeError, ValueError) and issubclass(KvCanaryTypeError, TypeError)


# (b) strict scalars ------------------------------------------------------------------------------

@pytest.mark.parametrize("value, error, message", [
    ("16", KvCanaryTypeError, "kv-canary: verify_capacity must be an int, got str"),
    (16.5, KvCanaryTypeError, "kv-canary: verify_capacity must be an int, got float"),
    (True, KvCanaryTypeError, "kv-canary: verify_capacity must be an int, got bool"),
    (np.bool_(True), KvCanaryTypeError,
     # numpy 2 renamed the type numpy.bool (numpy.bool_ stays an alias): the message names the type.
     f"kv-canary: verify_capacity must be an int, got numpy.{type(np.bool_(True)).__name__}"),
    (2**70, ValueError, f"kv-canary: verify_capacity must fit in int64, got {2**70}"),
])
def test_int_arguments_are_strict(host_xp, value, error, message):
    call, outputs = _plan_call(host_xp, verify_capacity=value)
    assert_raises_unchanged(host_xp, call, message, outputs, error)


def test_numpy_integer_scalars_are_ints(host_xp):
    call, outputs = _plan_call(host_xp, verify_capacity=np.int64(4))
    call()
    assert host_xp.tolist(outputs[0]) == [0]


@pytest.mark.parametrize("value, type_name", [
    (1, "int"), (0, "int"), ("yes", "str"), (None, "None"), (np.int64(1), "numpy.int64")])
def test_flags_must_be_real_bools(host_xp, value, type_name):
    state, verify = _verify_setup(host_xp)
    assert_raises_unchanged(
        host_xp, lambda: kvcanary.launch_canary_verify_kernel(
            context=state.context(), plan=verify, check_verify_expected_token=value),
        f"kv-canary: check_verify_expected_token must be a bool, got {type_name}",
        [state.kernel_run_counter], KvCanaryTypeError)


@pytest.mark.parametrize("stream, error, message", [
    ("x", KvCanaryTypeError, "kv-canary: stream must be an int, got str"),
    (1.5, KvCanaryTypeError, "kv-canary: stream must be an int, got float"),
    (-1, ValueError, "kv-canary: stream must be a non-negative handle, got -1"),
])
def test_stream_is_strict(host_xp, stream, error, message):
    state, verify = _verify_setup(host_xp)
    assert_raises_unchanged(
        host_xp, lambda: kvcanary.launch_canary_verify_kernel(
            context=state.context(), plan=verify, stream=stream),
        message, [state.kernel_run_counter], error)


@pytest.mark.parametrize("value", [2**64, 2**70, -2**63 - 1])
def test_hash_helpers_reject_out_of_range_ints_instead_of_wrapping(value):
    for call in (lambda: kvcanary.splitmix64(value),
                 lambda: kvcanary.splitmix64_mix3(1, value, 2),
                 lambda: kvcanary.to_signed_int64(value)):
        with pytest.raises(ValueError, match=r"^kv-canary: \w must be in \[-2\*\*63, 2\*\*64\)"):
            call()


def test_hash_helpers_keep_the_twos_complement_reading():
    assert kvcanary.splitmix64(-1) == kvcanary.splitmix64(2**64 - 1)
    assert kvcanary.to_signed_int64(2**64 - 1) == -1
    with pytest.raises(KvCanaryTypeError, match="^kv-canary: x must be an int, got bool$"):
        kvcanary.splitmix64(True)


@pytest.mark.parametrize("field", ["page_size", "num_bytes_per_token", "read_bytes"])
def test_real_kv_source_scalars_are_strict(field):
    values = dict(page_size=1, num_bytes_per_token=16, read_bytes=16)
    values[field] = "16"
    with pytest.raises(KvCanaryTypeError,
                       match=f"^kv-canary: RealKvSource.{field} must be an int, got str$"):
        kvcanary.RealKvSource(np.zeros((4, 32), np.uint8), **values)


def test_plan_sizes_and_host_helpers_are_strict(host_xp):
    with pytest.raises(KvCanaryTypeError, match="^kv-canary: verify_capacity must be an int"):
        kvcanary.VerifyPlan.allocation_bytes(16.0)
    with pytest.raises(KvCanaryTypeError, match="^kv-canary: slot_idx must be an int, got float"):
        kvcanary.compute_slot_hash(host_xp.zeros((4, 32), "uint8"), 1.0)
    with pytest.raises(KvCanaryTypeError, match="^kv-canary: real_kv_sources must be a tuple"):
        kvcanary.real_kv_hash(None, 0, kvcanary.RealKvHashMode.PARTIAL)


# (c) DLPack: size-0 and size-1 dimensions --------------------------------------------------------

@needs_torch
def test_empty_torch_tensor_with_odd_exported_strides_is_accepted():
    # torch exports strides (1, 1) for an empty [0, 32] tensor; no element is addressed.
    source = kvcanary.RealKvSource(torch.zeros((0, 32), dtype=torch.uint8), 1, 16, 16)
    assert source.page_size == 1


@needs_torch
def test_size_one_dimension_with_any_stride_is_accepted():
    base = torch.zeros(256, dtype=torch.uint8)
    row = torch.as_strided(base, (1, 32), (7, 1))  # a single row: its pitch addresses nothing
    kvcanary.RealKvSource(row, 1, 16, 16)
    table = torch.zeros((4, 9), dtype=torch.int64)
    out = torch.zeros(1, dtype=torch.int64)
    _swa(table[2:3, 4], torch.arange(10) * 3, out)()
    assert out.tolist() == [0]


def test_empty_inputs_are_accepted(host_xp):
    state = State(host_xp, 4)
    _, write = make_plans(host_xp, 2, 1)
    empty = host_xp.zeros((3, 5))[:0, 0]
    kvcanary.launch_canary_write_kernel(context=state.context(), plan=write, input_ids=empty,
                                        positions=empty, out_cache_loc=empty)
    assert state.counters() == (1, 0)


@needs_torch
def test_a_stride_zero_view_of_any_length_is_refused_without_overflow():
    # torch lets a view of 2^63 - 1 elements share one element (stride 0): its span is 8 bytes,
    # so the bounds accept it, and scatter's offsets check must not compute bs + 1 in int64.
    pool = torch.full((3, 4), 9, dtype=torch.int32)
    huge = torch.zeros(1, dtype=torch.int64).as_strided((2**63 - 1,), (0,))
    assert_raises_unchanged(
        Backend("torch"),
        lambda: kvcanary.launch_scatter_req_token_ids_kernel(
            flat_in=torch.tensor([1, 2]), offsets=torch.tensor([0, 2]), req_pool_indices=huge,
            pool_out=pool),
        "kv-canary: scatter_req_token_ids offsets length 2 != bs+1 (9223372036854775808)", [pool])

