"""launch_canary_fused_verify_kernel (a kvcanary addition) after launch_plan_offsets_kernel must
report what launch_canary_plan_kernels + launch_canary_verify_kernel report: the scenario of
test_scenario.py runs once each way, with the same corruptions, and the rows, counters and
records must agree. Also: its validation raises ValueError and writes nothing."""

from conftest import assert_raises_unchanged
from test_scenario import Engine

import kvcanary


class FusedEngine(Engine):
    """The same engine, verifying through the offsets stage and the fused launch."""

    def __init__(self, xp):
        super().__init__(xp)
        self.offsets_scratch = xp.zeros(kvcanary.PLAN_BS_BLOCK_SIZE + 1)

    def verify(self, rows, prefix, extend):
        xp = self.xp
        kvcanary.launch_plan_offsets_kernel(
            req_pool_indices=xp.array(rows), prefix_lens=xp.array(prefix),
            extend_seq_lens=xp.array(extend), req_to_token=self.req_to_token,
            out_verify_offsets_scratch=self.offsets_scratch,
            out_write_offsets=self.write_plan.write_offsets,
            out_write_seed_slot_indices=self.write_plan.write_seed_slot_indices,
            out_verify_num_valid=self.verify_plan.verify_num_valid,
            out_verify_enable=self.verify_plan.enable,
            out_write_num_valid_reqs=self.write_plan.write_num_valid_reqs, verify_capacity=32)
        kvcanary.launch_canary_fused_verify_kernel(
            context=self.context(), req_pool_indices=xp.array(rows),
            prefix_lens=xp.array(prefix), req_to_token=self.req_to_token,
            verify_offsets_scratch=self.offsets_scratch,
            verify_num_valid=self.verify_plan.verify_num_valid,
            verify_enable=self.verify_plan.enable, verify_capacity=32,
            req_to_verify_expected_tokens=self.pool,
            req_to_verify_expected_tokens_valid_lens=xp.array(prefix),
            check_verify_expected_token=True)


def run(engine):
    engine.step([1, 2], [[101, 102, 103, 104], [201, 202, 203]])
    engine.step([1, 2, 0], [[105], [204], [0]])
    engine.kv[int(engine.table[1, 2]), 5] = 0
    engine.state.set_field(int(engine.table[2, 1]), kvcanary.CANARY_FIELD_TOKEN, 999)
    engine.step([2, 1, 0], [[205], [106], [0]])
    engine.step([1, 2], [[107], [206]])
    return engine


def test_fused_verify_reports_what_plan_and_verify_report(xp):
    planned, fused = run(Engine(xp)), run(FusedEngine(xp))
    rows = sorted(planned.state.rows())  # CUDA records from several threads: compare as sets
    assert len(rows) == 6
    assert sorted(fused.state.rows()) == rows
    assert fused.state.counters() == planned.state.counters()
    for slot in range(32):
        assert fused.state.record(slot) == planned.state.record(slot)


def test_fused_verify_validation_writes_nothing(host_xp):
    engine, xp = FusedEngine(host_xp), host_xp
    state = engine.state
    assert_raises_unchanged(
        xp,
        lambda: kvcanary.launch_canary_fused_verify_kernel(
            context=engine.context(), req_pool_indices=xp.array([1, 2]),
            prefix_lens=xp.array([1]), req_to_token=engine.req_to_token,
            verify_offsets_scratch=engine.offsets_scratch,
            verify_num_valid=engine.verify_plan.verify_num_valid,
            verify_enable=engine.verify_plan.enable, verify_capacity=32),
        "kv-canary: prefix_lens length must be 2, got 1",
        [state.ring, state.write_index, state.kernel_run_counter, state.slot_run_counter])
