"""Hypothesis properties of the Python boundary, for every launcher: over shapes, dtypes,
strides, aliasing and extreme scalars, a call either runs or raises a ``kv-canary:`` ValueError
and changes nothing; ints are taken exactly when they are ints within int64; the hash helpers
read [-2**63, 2**64) as two's complement and refuse the rest; swa_translate and scatter match
their definitions on strided, empty and aliased tensors. Derandomized and bounded (a few
seconds in all)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from conftest import HAVE_TORCH, Backend
from launch_cases import CASES, arrays_of

import kvcanary

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

BOUNDED = settings(max_examples=40, derandomize=True, deadline=None, database=None,
                   suppress_health_check=[HealthCheck.too_slow])
BACKENDS = st.sampled_from(["numpy"] + (["torch"] if HAVE_TORCH else []))
DTYPES = st.sampled_from(["int64", "int32", "uint8", "float32"])
SCALARS = st.one_of(st.integers(min_value=-(2**80), max_value=2**80), st.booleans(),
                    st.floats(allow_nan=True), st.text(max_size=3), st.none())


def _host(array):
    return np.asarray(array.detach().cpu() if hasattr(array, "detach") else array)


def _strided_array(xp, data, dtype, shape):
    """A view of `shape` with a random step per dimension (possibly 0-size or size-1 dims)."""
    steps = [data.draw(st.integers(1, 3)) for _ in shape]
    base = xp.zeros(tuple(max(n * s, 1) for n, s in zip(shape, steps)), dtype)
    return base[tuple(slice(0, n * s, s) for n, s in zip(shape, steps))]


def _assert_clean(call, arrays):
    """`call` runs, or raises a kv-canary ValueError leaving every array as it was."""
    before = [np.array(_host(a), copy=True) for a in arrays]
    try:
        call()
    except ValueError as error:
        assert str(error).startswith("kv-canary: "), error
        for old, array in zip(before, arrays):
            np.testing.assert_array_equal(old, _host(array))


@pytest.mark.parametrize("make_case", CASES, ids=lambda make: make.__name__)
@BOUNDED
@given(backend=BACKENDS, data=st.data(), dtype=DTYPES,
       shape=st.lists(st.integers(0, 5), min_size=1, max_size=3))
def test_any_tensor_argument_runs_or_is_rejected_cleanly(make_case, backend, data, dtype, shape):
    xp = Backend(backend)
    case = make_case(xp)
    tensors = [(n, None) for n, role in case.roles.items() if role in ("in", "opt", "out")]
    tensors += [(n, f.name) for n, role in case.roles.items()
                if role in ("ctx", "plan_v", "opt_plan_v", "plan_w")
                for f in dataclasses.fields(case.kwargs[n]) if hasattr(getattr(case.kwargs[n],
                                                                               f.name), "shape")]
    name, field = data.draw(st.sampled_from(tensors))
    value = data.draw(st.one_of(st.just("strided"), st.just("alias")))
    if value == "alias":  # another argument's array in this place (outputs overlapping inputs)
        replacement = data.draw(st.sampled_from(arrays_of(case.kwargs)))
    else:
        replacement = _strided_array(xp, data, dtype, shape)
    if field is not None:  # a context or plan field
        replacement = dataclasses.replace(case.kwargs[name], **{field: replacement})
    arrays = arrays_of(case.kwargs) + arrays_of(replacement)
    _assert_clean(lambda: case.call(**{name: replacement}), arrays)


@pytest.mark.parametrize("make_case", CASES, ids=lambda make: make.__name__)
@BOUNDED
@given(data=st.data(), value=SCALARS)
def test_scalar_arguments_are_taken_exactly_when_int64(make_case, data, value):
    case = make_case(Backend("numpy"))
    scalars = [n for n, role in case.roles.items() if role in ("int", "opt_int")]
    if not scalars:
        scalars = ["stream"]
    name = data.draw(st.sampled_from(scalars))
    is_int = isinstance(value, int) and not isinstance(value, bool)
    arrays = arrays_of(case.kwargs)
    before = [np.array(a, copy=True) for a in arrays]
    try:
        case.call(**{name: value})
    except ValueError as error:
        assert str(error).startswith("kv-canary: "), error
        if not is_int and not (value is None and case.roles.get(name) == "opt_int"):
            assert isinstance(error, kvcanary.KvCanaryTypeError)
            assert str(error).startswith(f"kv-canary: {name} must be an int, got ")
        for old, array in zip(before, arrays):
            np.testing.assert_array_equal(old, array)
        return
    assert is_int or (value is None and case.roles.get(name, "opt_int") == "opt_int")
    assert value is None or -(2**63) <= value < 2**63


@BOUNDED
@given(x=st.integers(min_value=-(2**65), max_value=2**65))
def test_hash_helpers_read_twos_complement_and_refuse_the_rest(x):
    if -(2**63) <= x < 2**64:
        assert kvcanary.splitmix64(x) == kvcanary.splitmix64(x % 2**64)
        assert kvcanary.to_signed_int64(x) % 2**64 == x % 2**64
        assert kvcanary.splitmix64_mix3(x, 0, x) == kvcanary.splitmix64_mix3(x % 2**64, 0,
                                                                              x % 2**64)
    else:
        for call in (kvcanary.splitmix64, kvcanary.to_signed_int64):
            with pytest.raises(ValueError, match=r"^kv-canary: x must be in"):
                call(x)


@BOUNDED
@given(backend=BACKENDS, data=st.data(), n=st.integers(0, 6), lut_len=st.integers(1, 6),
       in_place=st.booleans())
def test_swa_translate_matches_its_definition_on_strided_and_aliased_tensors(
        backend, data, n, lut_len, in_place):
    xp = Backend(backend)
    slots = _strided_array(xp, data, "int64", [n])
    values = data.draw(st.lists(st.integers(-3, 9), min_size=n, max_size=n))
    for i, v in enumerate(values):
        slots[i] = v
    lut = xp.array(np.arange(lut_len) * 10 + 1)
    out = slots if in_place else xp.zeros(n)
    expected = [v if v < 0 else min(v, lut_len - 1) * 10 + 1 for v in values]
    try:
        kvcanary.launch_swa_translate_kernel(slot_indices=slots, full_to_swa_index_mapping=lut,
                                             out_slot_indices=out)
    except ValueError as error:  # only a strided view may be refused (contiguity)
        assert str(error).startswith("kv-canary: ") and "contiguous" in str(error), error
        return
    assert _host(out).tolist() == expected


@BOUNDED
@given(backend=BACKENDS, data=st.data(), rows=st.integers(1, 4), width=st.integers(0, 5),
       lens=st.lists(st.integers(0, 6), min_size=0, max_size=3))
def test_scatter_matches_its_definition_on_strided_pools(backend, data, rows, width, lens):
    xp = Backend(backend)
    pool = _strided_array(xp, data, "int32", [rows, width])
    targets = [data.draw(st.integers(-1, rows)) for _ in lens]
    offsets = np.concatenate([[0], np.cumsum(lens)]).astype(np.int64)
    flat = np.arange(100, 100 + int(offsets[-1]), dtype=np.int64)
    expected = np.zeros((rows, width), np.int32)
    for r, target in enumerate(targets):
        if 0 <= target < rows:
            count = min(lens[r], width)
            expected[target, :count] = flat[offsets[r]:offsets[r] + count]
    kvcanary.launch_scatter_req_token_ids_kernel(
        flat_in=xp.array(flat), offsets=xp.array(offsets), req_pool_indices=xp.array(targets),
        pool_out=pool)
    np.testing.assert_array_equal(_host(pool), expected)


@BOUNDED
@given(backend=BACKENDS, pitch=st.integers(0, 100), rows=st.sampled_from([0, 1]))
def test_size_zero_and_one_dimensions_accept_any_stride(backend, pitch, rows):
    xp = Backend(backend)
    if xp.is_torch:
        import torch
        view = torch.as_strided(torch.zeros(256, dtype=torch.uint8), (rows, 32), (pitch, 1))
    else:
        view = np.lib.stride_tricks.as_strided(np.zeros(256, np.uint8), (rows, 32), (pitch, 1))
    kvcanary.RealKvSource(view, 1, 16, 16)
