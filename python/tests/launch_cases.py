"""Valid calls of every launcher, built fresh on a backend, for the malformed-call harness and
the property tests: each case names its launcher, its keyword arguments, which of them are
outputs, and the role of every argument (what kind of malformed value it can be given)."""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

import numpy as np
from conftest import State, make_plans

import kvcanary

# Roles: "in" a required tensor, "opt" an optional tensor (None valid), "out" a tensor the call
# writes, "int" a required int, "opt_int" an optional int, "flag" a bool, "ctx" a context
# (paired_context: "opt_ctx"), "plan_v" / "plan_w" a plan object ("opt_plan_v": None valid;
# "opt_plan_v_written": also, its arrays are written).
TABLE = np.zeros((4, 8), np.int32)
TABLE[1, :6] = [1, 2, 3, 4, 5, 6]
TABLE[2, :4] = [7, 8, 9, 10]


@dataclasses.dataclass
class Case:
    launcher: Callable[..., None]
    kwargs: dict
    roles: dict

    def call(self, **overrides: Any) -> None:
        self.launcher(**{**self.kwargs, **overrides})


def _batch(xp):
    return dict(req_pool_indices=xp.array([1, 2]), prefix_lens=xp.array([3, 2]),
                req_to_token=xp.array(TABLE, "int32"))


def _offsets_outputs(xp):
    return dict(out_verify_offsets_scratch=xp.zeros(kvcanary.PLAN_BS_BLOCK_SIZE + 1),
                out_write_offsets=xp.zeros(3), out_write_seed_slot_indices=xp.zeros(2),
                out_verify_num_valid=xp.zeros(1, "int32"), out_verify_enable=xp.zeros(1, "int32"),
                out_write_num_valid_reqs=xp.zeros(1, "int32"))


def _run_offsets(xp):
    outputs = _offsets_outputs(xp)
    kvcanary.launch_plan_offsets_kernel(**_batch(xp), extend_seq_lens=xp.array([1, 1]),
                                        verify_capacity=8, **outputs)
    return outputs


def _planned(xp):
    verify, write = make_plans(xp, 8, 2)
    kvcanary.launch_canary_plan_kernels(verify_plan_out=verify, write_plan_out=write, **_batch(xp),
                                        extend_seq_lens=xp.array([1, 1]), verify_capacity=8)
    return verify, write


_PLAN_INPUT_ROLES = dict(req_pool_indices="in", prefix_lens="in", req_to_token="in",
                         full_to_swa_index_mapping="opt", req_to_verify_expected_tokens="opt",
                         req_to_verify_expected_tokens_valid_lens="opt",
                         kv_token_id_vs_position_offset="int", swa_window_size="int",
                         block_table="opt", block_size="int", verify_sample="int",
                         verify_phase="opt")


def plan_case(xp):
    verify, write = make_plans(xp, 8, 2)
    kwargs = dict(verify_plan_out=verify, write_plan_out=write, **_batch(xp),
                  extend_seq_lens=xp.array([1, 1]), verify_capacity=8, swa_window_size=0,
                  kv_token_id_vs_position_offset=0, verify_offsets_scratch=None,
                  req_to_token_stride0=None)
    roles = dict(_PLAN_INPUT_ROLES, verify_plan_out="plan_v", write_plan_out="plan_w",
                 extend_seq_lens="in", verify_capacity="int", verify_offsets_scratch="opt",
                 req_to_token_stride0="opt_int")
    return Case(kvcanary.launch_canary_plan_kernels, kwargs, roles)


def offsets_case(xp):
    outputs = _offsets_outputs(xp)
    kwargs = dict(**_batch(xp), extend_seq_lens=xp.array([1, 1]), verify_capacity=8,
                  swa_window_size=0, req_to_token_stride0=None, lut_len=None, **outputs)
    roles = dict(_PLAN_INPUT_ROLES, extend_seq_lens="in", verify_capacity="int",
                 req_to_token_stride0="opt_int", lut_len="opt_int",
                 **{name: "out" for name in outputs})
    for unread in ("req_to_verify_expected_tokens", "req_to_verify_expected_tokens_valid_lens",
                   "kv_token_id_vs_position_offset"):
        del roles[unread]  # not parameters of the offsets stage
    return Case(kvcanary.launch_plan_offsets_kernel, kwargs, roles)


def entries_case(xp):
    offsets = _run_offsets(xp)
    outputs = {name: xp.zeros(8) for name in (
        "out_verify_slot_indices", "out_verify_expected_tokens", "out_verify_expected_positions",
        "out_verify_prev_slot_indices")}
    kwargs = dict(**_batch(xp), verify_offsets_scratch=offsets["out_verify_offsets_scratch"],
                  verify_enable=offsets["out_verify_enable"], kv_token_id_vs_position_offset=0,
                  swa_window_size=0, **outputs)
    roles = dict(_PLAN_INPUT_ROLES, verify_offsets_scratch="in", verify_enable="in",
                 **{name: "out" for name in outputs})
    return Case(kvcanary.launch_plan_entries_kernel, kwargs, roles)


def fused_case(xp):
    offsets = _run_offsets(xp)
    stored, _ = _planned(xp)
    state = State(xp, 12)
    kwargs = dict(context=state.context(), **_batch(xp),
                  verify_offsets_scratch=offsets["out_verify_offsets_scratch"],
                  verify_num_valid=offsets["out_verify_num_valid"],
                  verify_enable=offsets["out_verify_enable"], verify_capacity=8,
                  swa_window_size=0, kv_token_id_vs_position_offset=0,
                  check_verify_expected_token=False, paired_context=None,
                  req_to_token_stride0=None, stored_entries=stored)
    roles = dict(_PLAN_INPUT_ROLES, context="ctx", verify_offsets_scratch="in",
                 verify_num_valid="in", verify_enable="in", verify_capacity="int",
                 check_verify_expected_token="flag", paired_context="opt_ctx",
                 req_to_token_stride0="opt_int", stored_entries="opt_plan_v")
    return Case(kvcanary.launch_canary_fused_verify_kernel, kwargs, roles)


def verify_case(xp):
    verify, _ = _planned(xp)
    kwargs = dict(context=State(xp, 12).context(), plan=verify, check_verify_expected_token=False,
                  paired_context=None)
    roles = dict(context="ctx", plan="plan_v", check_verify_expected_token="flag",
                 paired_context="opt_ctx")
    return Case(kvcanary.launch_canary_verify_kernel, kwargs, roles)


def write_case(xp):
    _, write = _planned(xp)
    kwargs = dict(context=State(xp, 12).context(), plan=write, input_ids=xp.array([5, 6]),
                  positions=xp.array([3, 2]), out_cache_loc=xp.array([4, 9]),
                  enable_write_input_assert=False, expected_input_tokens=None,
                  expected_input_positions=None, paired_context=None)
    roles = dict(context="ctx", plan="plan_w", input_ids="in", positions="in",
                 out_cache_loc="in", enable_write_input_assert="flag",
                 expected_input_tokens="opt", expected_input_positions="opt",
                 paired_context="opt_ctx")
    return Case(kvcanary.launch_canary_write_kernel, kwargs, roles)


def advance_case(xp):
    kwargs = dict(verify_phase=xp.array([0, 5, -3, 7]), req_pool_indices=xp.array([1, 0, 3]))
    roles = dict(verify_phase="out", req_pool_indices="opt")
    return Case(kvcanary.launch_advance_verify_phase_kernel, kwargs, roles)


def scatter_case(xp):
    kwargs = dict(flat_in=xp.array([1, 2, 3, 4, 5]), offsets=xp.array([0, 3, 5]),
                  req_pool_indices=xp.array([1, 3]), pool_out=xp.zeros((4, 6), "int32"))
    roles = dict(flat_in="in", offsets="in", req_pool_indices="in", pool_out="out")
    return Case(kvcanary.launch_scatter_req_token_ids_kernel, kwargs, roles)


def swa_case(xp):
    kwargs = dict(slot_indices=xp.array([3, -1, 0, 40]), full_to_swa_index_mapping=xp.array(
        np.arange(16) * 2), out_slot_indices=xp.zeros(4))
    roles = dict(slot_indices="in", full_to_swa_index_mapping="in", out_slot_indices="out")
    return Case(kvcanary.launch_swa_translate_kernel, kwargs, roles)


def stage_case(xp):
    """A HEAD fused stage whose parts are the cases above (the plan offsets-only). A part's role
    is ("part", its roles): the harness mutates one argument of one part."""
    plan = plan_case(xp)
    plan.kwargs.update(verify_plan_out=kvcanary.VerifyPlan(
        None, None, None, None, xp.zeros(1, "int32"), xp.zeros(1, "int32")),
        verify_offsets_scratch=xp.zeros(3))
    plan.roles["verify_offsets_scratch"] = "out"  # required by an offsets-only plan
    verify = fused_case(xp)
    verify.roles["stored_entries"] = "opt_plan_v_written"  # HEAD stores its entries there
    parts = dict(plan=plan, verify=verify, write=write_case(xp), advance_phase=advance_case(xp))
    for part in parts.values():
        part.kwargs.pop("stream", None)
    return Case(kvcanary.launch_canary_fused_stage, {n: c.kwargs for n, c in parts.items()},
                {n: ("part", c.roles) for n, c in parts.items()})


CASES = [plan_case, offsets_case, entries_case, fused_case, verify_case, write_case,
         advance_case, scatter_case, swa_case]

# The tensors a context and a plan carry (mutated like the launcher's own tensor arguments).
CONTEXT_TENSORS = ("canary_buf", "violation_ring", "violation_write_index", "slot_run_counter",
                   "kernel_run_counter", "enable_chain_position_assert")


def arrays_of(value: Any) -> list:
    """Every numpy array / torch tensor reachable from a call argument (dataclass fields too)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return [a for f in dataclasses.fields(value) for a in arrays_of(getattr(value, f.name))]
    if isinstance(value, dict):
        return arrays_of(list(value.values()))
    if isinstance(value, (tuple, list)):
        return [a for item in value for a in arrays_of(item)]
    return [value] if hasattr(value, "__dlpack__") and hasattr(value, "shape") else []
