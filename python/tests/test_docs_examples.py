"""The fused-stage example of docs/python.md runs as written: executed on numpy arrays for a
prefill and two decodes of two requests over a block table, it reports nothing on clean records,
advances the phases, and reports a record corrupted in between."""

import pathlib
import re

import numpy as np
from conftest import Backend, State, make_plans

import kvcanary

DOC = pathlib.Path(__file__).resolve().parents[2] / "docs" / "python.md"
BLOCK = 16


def _stage_example():
    text = DOC.read_text()
    match = re.search(r"```python\n(counts = kvcanary\.VerifyPlan\(.*?)```", text, re.S)
    assert match, "docs/python.md has no fused-stage example"
    return compile(match.group(1), str(DOC), "exec")


class _Pool:
    """K and V canary buffers shared by HEAD and TAIL (contexts of their tags), and the batch
    state the example reads."""

    def __init__(self, xp):
        self.xp = xp
        self.k, self.v = State(xp, 8 * BLOCK), State(xp, 8 * BLOCK)
        tags = kvcanary.CanaryLaunchTag
        self.names = dict(
            head_k=self.k.context(tags.HEAD_K_FULL), head_v=self.v.context(tags.HEAD_V_FULL),
            tail_k=self.k.context(tags.TAIL_K_FULL), tail_v=self.v.context(tags.TAIL_V_FULL),
            blocks=xp.array([[0, 0], [1, 2], [3, 4]], "int32"), phase=xp.zeros(3),
            num_valid=xp.zeros(1, "int32"), enable=xp.zeros(1, "int32"), scratch=xp.zeros(4),
            capacity=64, kvcanary=kvcanary)
        self.names["entries"], self.names["write_plan"] = make_plans(xp, 64, 2)
        self.lengths = [0, 0]

    def forward(self, code, extend):
        xp, rows = self.xp, [1, 2]
        slots, positions = [], []
        for row, length, count in zip(rows, self.lengths, extend):
            for position in range(length, length + count):
                block = int(self.names["blocks"][row, position // BLOCK])
                slots.append(block * BLOCK + position % BLOCK)
                positions.append(position)
        exec(code, dict(self.names, rows=xp.array(rows), prefix_lens=xp.array(self.lengths),
                        extend_lens=xp.array(extend), input_ids=xp.array(positions) + 100,
                        positions=xp.array(positions), out_cache_loc=xp.array(slots)))
        self.lengths = [n + e for n, e in zip(self.lengths, extend)]
        return slots


def test_the_fused_stage_example_runs_as_written():
    code = _stage_example()
    pool = _Pool(Backend("numpy"))
    pool.forward(code, [20, 3])
    pool.forward(code, [1, 1])
    assert pool.k.rows() == [] and pool.v.rows() == []
    assert pool.names["phase"].tolist() == [0, 2, 2]  # each row's, once a forward
    launches, entries = pool.k.counters()
    assert launches == 8  # HEAD's verify and write, TAIL's verify and write, two forwards
    # The writes (23 tokens, then 2, each by HEAD and TAIL) and the decode's sampled verifies.
    assert 2 * 25 < entries < 2 * 25 + 2 * 23
    # The example verifies 1/8 of each prefix, and always the newest record: corrupt that one.
    newest = pool.forward(code, [1, 1])[0]
    pool.k.set_field(newest, kvcanary.CANARY_FIELD_POSITION, 77)
    pool.forward(code, [1, 1])
    assert {row[kvcanary.VIOLATION_FIELD_SLOT_IDX] for row in pool.k.rows()} == {newest}
    assert pool.v.rows() == []
    np.testing.assert_array_equal(pool.names["phase"], [0, 4, 4])
