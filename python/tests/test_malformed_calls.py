"""A seeded harness of malformed calls to every launcher: wrong dtypes, ranks, lengths, strides
and devices, None, non-tensors, read-only and aliased outputs, scalars of the wrong type or out
of range, on context and plan fields too. KVC_MALFORMED_CALLS sets how many (1,000 by default).

For each call: no crash; a rejection is a ValueError (KvCanaryTypeError included) whose text
starts with ``kv-canary:`` and leaves every array of the call unchanged; a mutation that is
invalid by construction is rejected; a mutation that keeps the call valid (a read-only input, a
None for an optional tensor) is accepted; the unmutated call is accepted."""

from __future__ import annotations

import collections
import dataclasses
import os
import random
from typing import Any

import numpy as np
import pytest
from conftest import HAVE_TORCH, Backend, FakeTensor
from launch_cases import CASES, CONTEXT_TENSORS, Case, arrays_of, stage_case

MALFORMED_CASES = CASES + [stage_case]

CALLS = int(os.environ.get("KVC_MALFORMED_CALLS", "1000"))
SEED = int(os.environ.get("KVC_MALFORMED_SEED", "20261204"))

NON_TENSORS = [[1, 2], "abc", object(), 3, 2.5, {}, b"\x00" * 8]
BAD_INTS = ["16", 16.5, True, False, None, [], 2**64, -(2**63) - 1, 2**70, np.bool_(True)]
EDGE_INTS = [0, -1, 1, 2**31, 2**63 - 1, -(2**63), np.int64(7), np.int32(-3)]
BAD_FLAGS = [1, 0, "True", None, np.bool_(False), 1.0]
BAD_STREAMS = ["x", 1.5, -1, True, object()]
DTYPES = ["int32", "int64", "uint8", "float32", "bool"]


def _as_numpy(array: Any) -> np.ndarray:
    return array.storage if isinstance(array, FakeTensor) else np.asarray(
        array.detach().cpu() if hasattr(array, "detach") else array)


def _retyped(xp: Backend, array: Any, rng: random.Random) -> Any:
    host = _as_numpy(array)
    dtype = rng.choice([d for d in DTYPES if np.dtype(d if d != "bool" else bool) != host.dtype])
    if dtype == "bool" and xp.is_torch:
        import torch
        return torch.from_numpy(host.astype(bool))
    converted = host.astype(bool if dtype == "bool" else dtype)
    return xp.array(converted, dtype) if dtype != "bool" else converted


def _strided(xp: Backend, array: Any) -> Any:
    host = _as_numpy(array)
    wide = np.zeros(host.shape[:-1] + (host.shape[-1] * 2,), host.dtype) if host.ndim else host
    if host.ndim:
        wide[..., ::2] = host
    converted = xp.array(wide, str(host.dtype)) if host.dtype != bool else wide
    return converted[..., ::2] if host.ndim else converted


def _read_only(array: Any) -> Any:
    copy = np.array(_as_numpy(array), copy=True)
    copy.flags.writeable = False
    return copy


def _tensor_mutation(xp, role, array, others, rng):
    """(value, kind): kind "invalid" must be rejected, "valid" accepted, "either" may go both."""
    choices = ["dtype", "rank", "length", "strided", "device", "none", "non_tensor", "alias"]
    if not xp.is_torch:
        choices.append("read_only")
    choice = rng.choice(choices)
    if array is None:  # an absent optional tensor: give it something
        choice = rng.choice(["device", "non_tensor", "length"])
    if choice == "dtype":
        return _retyped(xp, array, rng), "invalid"
    if choice == "rank":
        host = _as_numpy(array)
        return xp.array(host.reshape(-1) if host.ndim > 1 else host[:, None],
                        str(host.dtype)), "invalid"
    if choice == "length":
        if array is None:
            return xp.zeros(rng.choice([0, 1, 5])), "either"
        host = _as_numpy(array)
        size = rng.choice([0, 1, max(host.shape[0] - 1, 0), host.shape[0] + 3])
        grown = np.resize(host, (size,) + host.shape[1:]) if size else host[:0]
        return xp.array(grown, str(host.dtype)), "either"
    if choice == "strided":
        return _strided(xp, array), "either"
    if choice == "device":
        shape = list(_as_numpy(array).shape) if array is not None else [4]
        return FakeTensor(shape, "int64", device_type=2, device_id=rng.randrange(4)), "invalid"
    if choice == "none":
        return None, "valid" if role == "opt" else "invalid"
    if choice == "non_tensor":
        return rng.choice(NON_TENSORS), "invalid"
    if choice == "alias":
        return rng.choice(others), "either"
    return _read_only(array), "invalid" if role == "out" else "valid"


def _scalar_mutation(role, rng):
    if role == "flag":
        return rng.choice(BAD_FLAGS), "invalid"
    if role == "opt_int" and rng.random() < 0.2:
        return None, "valid"
    if rng.random() < 0.5:
        value = rng.choice(BAD_INTS)
        return value, "valid" if value is None and role == "opt_int" else "invalid"
    return rng.choice(EDGE_INTS), "either"


def _object_mutation(xp, case, name, role, rng):
    """A context or plan argument: replace the object, or one of its fields."""
    value = case.kwargs.get(name)
    optional = role.startswith("opt_")
    if value is None or rng.random() < 0.25:
        if optional and rng.random() < 0.3:
            return None, "valid"
        return rng.choice([object(), 3, "context"] + ([None] if not optional else [])), \
            "invalid"
    fields = [f.name for f in dataclasses.fields(value)]
    field = rng.choice(fields)
    if field == "kernel_kind":
        new, kind = _scalar_mutation("int", rng)
    elif field == "real_kv_hash_mode":
        new, kind = rng.choice([("1", "invalid"), (1.0, "invalid"), (7, "either"),
                                (2**40, "invalid")])
    elif field == "real_kv_sources":
        new, kind = rng.choice([("ab", "invalid"), (None, "invalid"), ([], "valid")])
    else:
        writes = "input_ids" in case.kwargs
        # Verify only reads canary_buf; only write reads the chain-assert flag, and only reads it.
        tensor_role = {"canary_buf": "out" if writes else "in",
                       "enable_chain_position_assert": "in" if writes else "opt"}.get(field, "out")
        if field not in CONTEXT_TENSORS:
            written = name.endswith("_out") or role == "opt_plan_v_written"
            tensor_role = "out" if written else "in"
        new, kind = _tensor_mutation(xp, tensor_role, getattr(value, field),
                                     arrays_of(case.kwargs), rng)
        if field == "enable_chain_position_assert" and not writes:
            kind = "either"  # only the write op reads it
        if name == "stored_entries" and field in ("verify_num_valid", "enable"):
            kind = "either"  # the fused verify reads only the stored entry arrays
    return dataclasses.replace(value, **{field: new}), kind


def _mutate(xp, case, rng, with_stream=True):
    name = rng.choice(list(case.roles) + (["stream"] if with_stream else []))
    role = case.roles.get(name, "stream")
    if isinstance(role, tuple):  # a fused stage's part: one of its arguments, as for its launcher
        part = Case(None, case.kwargs[name], role[1])
        inner, overrides, kind = _mutate(xp, part, rng, with_stream=False)
        return f"{name}.{inner}", {name: {**part.kwargs, **overrides}}, kind
    if role == "stream":
        if rng.random() < 0.3:
            return name, {name: rng.choice([0, 12345, 2**40])}, "valid"
        return name, {name: rng.choice(BAD_STREAMS)}, "invalid"
    if role in ("int", "opt_int", "flag"):
        value, kind = _scalar_mutation(role, rng)
    elif role in ("ctx", "opt_ctx", "plan_v", "opt_plan_v", "opt_plan_v_written", "plan_w"):
        value, kind = _object_mutation(xp, case, name, role, rng)
    else:
        value, kind = _tensor_mutation(xp, role, case.kwargs.get(name), arrays_of(case.kwargs), rng)
    return name, {name: value}, kind


def _describe(case, overrides: dict) -> str:
    """The mutated argument, or for a context or plan its mutated field, and the value given."""
    parts = []
    for name, value in overrides.items():
        original = case.kwargs.get(name)
        if dataclasses.is_dataclass(value) and dataclasses.is_dataclass(original):
            parts += [f"{name}.{f.name}={getattr(value, f.name)!r:.80}"
                      for f in dataclasses.fields(value)
                      if getattr(value, f.name) is not getattr(original, f.name)]
        else:
            parts.append(f"{name}={value!r:.80}")
    return ", ".join(parts)


def run_harness(calls: int, seed: int) -> collections.Counter:
    """Runs `calls` malformed calls; returns counts by outcome (the test asserts on them)."""
    rng = random.Random(seed)
    counts = collections.Counter()
    failures = []
    backends = ["numpy"] + (["torch"] if HAVE_TORCH else [])
    for index in range(calls):
        xp = Backend(rng.choice(backends))
        case = rng.choice(MALFORMED_CASES)(xp)
        if index % 10 == 0:  # the unmutated call must go through
            try:
                case.call()
                counts["valid calls accepted"] += 1
            except Exception as error:  # noqa: BLE001 - any exception is a finding
                counts["valid calls rejected"] += 1
                failures.append((case.launcher.__name__, "valid", repr(error)))
            continue
        name, overrides, kind = _mutate(xp, case, rng)
        arrays = arrays_of(case.kwargs) + arrays_of(list(overrides.values()))
        before = [np.array(_as_numpy(a), copy=True) for a in arrays]
        try:
            case.call(**overrides)
        except Exception as error:  # noqa: BLE001 - the type is what is checked
            proper = isinstance(error, ValueError) and str(error).startswith("kv-canary: ")
            counts["rejected" if proper else "wrong exception"] += 1
            if not proper:
                failures.append((case.launcher.__name__, name, repr(error)))
            if kind == "valid":
                counts["valid mutations rejected"] += 1
                failures.append((case.launcher.__name__, name, "valid mutation: " + repr(error)))
            if any(not np.array_equal(b, _as_numpy(a)) for b, a in zip(before, arrays)):
                counts["outputs touched"] += 1
                failures.append((case.launcher.__name__, name, "output touched"))
            continue
        counts["accepted"] += 1
        if kind == "invalid":
            counts["accepted bad"] += 1
            failures.append((case.launcher.__name__, name,
                             "accepted " + _describe(case, overrides)))
    counts["failures"] = len(failures)
    run_harness.failures = failures
    return counts


def test_malformed_calls_are_rejected_cleanly():
    counts = run_harness(CALLS, SEED)
    print(dict(counts))
    assert run_harness.failures == []
    assert counts["rejected"] > CALLS // 2 and counts["valid calls accepted"] >= CALLS // 10


@pytest.mark.parametrize("make_case", MALFORMED_CASES, ids=lambda make: make.__name__)
def test_every_launcher_case_is_valid(make_case):
    make_case(Backend("numpy")).call()
