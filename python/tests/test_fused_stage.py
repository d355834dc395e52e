"""launch_canary_fused_stage (a kvcanary addition) must do exactly what its parts' launchers do one
after the other: a multi-forward engine runs once through separate launches and once through
stages, over a per-token table or a block table, with full or sampled verify, deriving or storing
the verify entries, with the same corruptions; rows, counters, records, phases and stored entries
must agree. Also: a stage's validation names the part and changes nothing."""

import numpy as np
import pytest
from conftest import HAVE_CUDA, Backend, State, assert_raises_unchanged, make_plans

import kvcanary

TAG = int(kvcanary.CanaryLaunchTag.HEAD_K_FULL)
BLOCK = 4
CAPACITY = 256


class StageEngine:
    """Requests in rows 1 and 2 of a pool of 4-token blocks (row 1 the odd blocks, row 2 the
    even ones; block 0 holds the padding slot). Each forward is HEAD's plan, fused verify and
    write, then (sampled) the phase advance: as separate launches, or as one fused stage."""

    def __init__(self, xp, paged, sample, store, stage):
        self.xp, self.sample, self.store, self.stage = xp, sample, store, stage
        self.state = State(xp, 160, ring_capacity=64)
        blocks = np.zeros((4, 16), np.int64)
        blocks[1] = 1 + 2 * np.arange(16)
        blocks[2] = 2 + 2 * np.arange(16)
        positions = np.arange(16 * BLOCK)
        self.slots = np.ascontiguousarray(blocks[:, positions // BLOCK] * BLOCK + positions % BLOCK)
        self.slots[0] = 0
        self.table = (dict(block_table=xp.array(blocks, "int32"), block_size=BLOCK) if paged
                      else dict(req_to_token=xp.array(self.slots, "int32")))
        self.phase = xp.array([0, 1, 2, 0]) if sample > 1 else None
        self.scratch = xp.zeros(8)
        _, self.write_plan = make_plans(xp, CAPACITY, 4)
        # The stage's plan is offsets-only: the counts, no entry arrays.
        self.counts = kvcanary.VerifyPlan(None, None, None, None, xp.zeros(1, "int32"),
                                          xp.zeros(1, "int32"))
        self.entries, _ = make_plans(xp, CAPACITY, 4)
        self.lengths = {1: 0, 2: 0}

    def inputs(self, rows, extend):
        """A forward's batch as host lists: prefix lengths, token ids, positions, slots."""
        prefix = [self.lengths[rp] if rp else 0 for rp in rows]
        ids, positions, slots = [], [], []
        for rp, count in zip(rows, extend):
            for i in range(count):
                position = self.lengths[rp] + i if rp else 0
                ids.append(1000 * rp + position if rp else 0)
                positions.append(position)
                slots.append(int(self.slots[rp, position]))
        return dict(rows=rows, prefix=prefix, extend=extend, ids=ids, positions=positions,
                    slots=slots)

    def parts(self, t):
        """The stage's parts (plan, verify, write, advance_phase) over the batch tensors `t`."""
        batch = dict(req_pool_indices=t["rows"], **self.table, verify_sample=self.sample,
                     verify_phase=self.phase)
        context = self.state.context(TAG)
        plan = dict(verify_plan_out=self.counts, write_plan_out=self.write_plan, **batch,
                    prefix_lens=t["prefix"], extend_seq_lens=t["extend"],
                    verify_capacity=CAPACITY, verify_offsets_scratch=self.scratch)
        verify = dict(context=context, **batch, prefix_lens=t["prefix"],
                      verify_offsets_scratch=self.scratch,
                      verify_num_valid=self.counts.verify_num_valid,
                      verify_enable=self.counts.enable, verify_capacity=CAPACITY)
        if self.stage and self.store:
            verify["stored_entries"] = self.entries
        write = dict(context=context, plan=self.write_plan, input_ids=t["ids"],
                     positions=t["positions"], out_cache_loc=t["slots"],
                     enable_write_input_assert=False)
        advance = (dict(verify_phase=self.phase, req_pool_indices=t["rows"])
                   if self.sample > 1 else None)
        return dict(plan=plan, verify=verify, write=write, advance_phase=advance)

    def launch(self, parts):
        if self.stage:
            kvcanary.launch_canary_fused_stage(**parts)
            return
        plan, verify = parts["plan"], parts["verify"]
        kvcanary.launch_canary_plan_kernels(**plan)
        if self.store:  # what the stage stores, for comparison; this verify derives
            kvcanary.launch_plan_entries_kernel(
                req_pool_indices=plan["req_pool_indices"], prefix_lens=plan["prefix_lens"],
                **self.table, verify_sample=self.sample, verify_phase=self.phase,
                verify_offsets_scratch=self.scratch, verify_enable=self.counts.enable,
                out_verify_slot_indices=self.entries.verify_slot_indices,
                out_verify_expected_tokens=self.entries.verify_expected_tokens,
                out_verify_expected_positions=self.entries.verify_expected_positions,
                out_verify_prev_slot_indices=self.entries.verify_prev_slot_indices)
        kvcanary.launch_canary_fused_verify_kernel(**verify)
        kvcanary.launch_canary_write_kernel(**parts["write"])
        if parts["advance_phase"] is not None:
            kvcanary.launch_advance_verify_phase_kernel(**parts["advance_phase"])

    def commit(self, rows, extend):
        for rp, count in zip(rows, extend):
            if rp:
                self.lengths[rp] += count

    def forward(self, rows, extend):
        host = self.inputs(rows, extend)
        self.launch(self.parts({name: self.xp.array(host[name]) for name in TENSORS}))
        self.commit(rows, extend)


TENSORS = ("rows", "prefix", "extend", "ids", "positions", "slots")


def run(engine):
    engine.forward([1, 2], [37, 21])
    engine.forward([1, 2, 0], [1, 1, 1])
    # A record of each request corrupted: sampled or not, a later forward's verify reads it.
    engine.state.set_field(int(engine.slots[1, 20]), kvcanary.CANARY_FIELD_POSITION, 99)
    engine.state.set_field(int(engine.slots[2, 3]), kvcanary.CANARY_FIELD_PREV_HASH, 5)
    for _ in range(5):  # padding rows come last: their tokens follow every live row's
        engine.forward([2, 1, 0], [1, 1, 1])
    return engine


@pytest.mark.parametrize("store", [False, True], ids=["derive", "store"])
@pytest.mark.parametrize("sample", [1, 3], ids=["full", "sampled"])
@pytest.mark.parametrize("paged", [False, True], ids=["req_to_token", "block_table"])
def test_a_stage_does_what_its_parts_do(xp, paged, sample, store):
    separate = run(StageEngine(xp, paged, sample, store, stage=False))
    staged = run(StageEngine(xp, paged, sample, store, stage=True))
    rows = sorted(separate.state.rows())  # CUDA records from several threads: compare as sets
    # Each corrupted record and the successor whose chain hashes it: nothing else.
    assert {row[kvcanary.VIOLATION_FIELD_SLOT_IDX] for row in rows} == {
        int(separate.slots[rp, p]) for rp, p in ((1, 20), (1, 21), (2, 3), (2, 4))}
    assert sorted(staged.state.rows()) == rows
    assert staged.state.counters() == separate.state.counters()
    for slot in range(160):
        assert staged.state.record(slot) == separate.state.record(slot)
    if sample > 1:
        assert xp.tolist(staged.phase) == xp.tolist(separate.phase) == [0, 8, 9, 0]
    if store:
        for field in ("verify_slot_indices", "verify_expected_positions",
                      "verify_prev_slot_indices"):
            assert xp.tolist(getattr(staged.entries, field)) == \
                xp.tolist(getattr(separate.entries, field))


def _stage_call(engine):
    """A valid HEAD stage of the engine's next decode, as the keyword arguments of the call."""
    host = engine.inputs([1, 2], [1, 1])
    return engine.parts({name: engine.xp.array(host[name]) for name in TENSORS})


def _outputs(engine):
    state = engine.state
    return [state.canary, state.ring, state.write_index, state.kernel_run_counter,
            state.slot_run_counter, engine.scratch, engine.counts.verify_num_valid,
            engine.write_plan.write_offsets, engine.write_plan.write_seed_slot_indices]


def test_a_bad_part_is_named_and_nothing_runs(host_xp):
    engine = StageEngine(host_xp, paged=True, sample=1, store=False, stage=True)
    engine.forward([1, 2], [5, 3])
    xp = host_xp
    call = _stage_call(engine)
    kvcanary.launch_canary_fused_stage(**call)  # valid as built
    engine.commit([1, 2], [1, 1])

    def expect(message, error=ValueError, **parts):
        assert_raises_unchanged(
            xp, lambda: kvcanary.launch_canary_fused_stage(**{**_stage_call(engine), **parts}),
            message, _outputs(engine), error)

    good = _stage_call(engine)
    expect("kv-canary: fused_stage write: positions length must be 2, got 1",
           write={**good["write"], "positions": xp.array([6])})
    expect("kv-canary: fused_stage verify: prefix_lens length must be 2, got 3",
           verify={**good["verify"], "prefix_lens": xp.array([6, 4, 0])})
    expect("kv-canary: fused_stage plan: block_size must be in [1, 1048576], got 0",
           plan={**good["plan"], "block_size": 0})
    expect("kv-canary: fused_stage advance_phase: verify_phase must have dtype torch.int64, "
           "got torch.int32", advance_phase=dict(verify_phase=xp.zeros(4, "int32")))
    expect("kv-canary: fused_stage verify: launch_canary_fused_verify_kernel takes no argument "
           "'bogus'", kvcanary.KvCanaryTypeError, verify={**good["verify"], "bogus": 1})
    expect("kv-canary: fused_stage write: launch_canary_write_kernel takes no argument 'stream' "
           "(the stage's stream is launch_canary_fused_stage's)", kvcanary.KvCanaryTypeError,
           write={**good["write"], "stream": 0})
    expect("kv-canary: fused_stage plan must be a dict of keyword arguments, got list",
           kvcanary.KvCanaryTypeError, plan=[1])
    expect("kv-canary: fused_stage verify: verify_capacity must be an int, got str",
           kvcanary.KvCanaryTypeError, verify={**good["verify"], "verify_capacity": "8"})
    stored, _ = make_plans(xp, CAPACITY, 1)  # HEAD writes them: read-only is refused
    expect("kv-canary: fused_stage verify.stored_entries, stored after the plan: "
           "out_verify_expected_positions must be writable",
           verify={**good["verify"], "stored_entries": _read_only_positions(stored)})


def _read_only_positions(plan):
    fields = {f: getattr(plan, f) for f in plan.__dataclass_fields__}
    positions = np.array(fields["verify_expected_positions"], copy=True)
    positions.flags.writeable = False
    fields["verify_expected_positions"] = positions
    return kvcanary.VerifyPlan(**fields)


@pytest.mark.skipif(not HAVE_CUDA, reason="no CUDA device or CUDA backend")
def test_a_captured_stage_replays_like_eager_stages():
    import torch

    decodes = [[2, 1, 0]] * 4
    reference = StageEngine(Backend("numpy"), paged=True, sample=3, store=True, stage=True)
    reference.forward([1, 2], [37, 21])
    for rows in decodes:
        reference.forward(rows, [1, 1, 1])
    engine = StageEngine(Backend("cuda"), paged=True, sample=3, store=True, stage=True)
    engine.forward([1, 2], [37, 21])
    static = {name: engine.xp.zeros(3) for name in TENSORS}
    parts = engine.parts(static)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):  # captured on torch's capture stream, not run
        kvcanary.launch_canary_fused_stage(**parts)
    for rows in decodes:
        host = engine.inputs(rows, [1, 1, 1])
        for name in TENSORS:
            static[name].copy_(torch.tensor(host[name]))
        graph.replay()
        engine.commit(rows, [1, 1, 1])
    torch.cuda.synchronize()
    assert engine.state.rows() == reference.state.rows() == []
    assert engine.state.counters() == reference.state.counters()
    np.testing.assert_array_equal(engine.xp.numpy(engine.state.canary),
                                  reference.xp.numpy(reference.state.canary))
    assert engine.xp.tolist(engine.phase) == reference.xp.tolist(reference.phase)
    np.testing.assert_array_equal(engine.xp.numpy(engine.entries.verify_slot_indices),
                                  reference.xp.numpy(reference.entries.verify_slot_indices))
