"""CUDA: torch's current stream is used by default, and a captured decode step (plan, verify,
write) replays with new inputs like eager launches. Skipped without a GPU."""

import numpy as np
import pytest
from conftest import HAVE_CUDA, Backend, State, make_plans

import kvcanary

pytestmark = pytest.mark.skipif(not HAVE_CUDA, reason="no CUDA device or CUDA backend")
TAG = int(kvcanary.CanaryLaunchTag.TAIL_K_FULL)


class DecodeStep:
    """Static buffers of a 2-row decode step over table rows 1 and 2 (slots row*16 + position)."""

    def __init__(self, xp):
        self.xp = xp
        self.state = State(xp, 64)
        self.verify, self.write = make_plans(xp, 32, 2)
        self.table = xp.array(np.arange(4)[:, None] * 16 + np.arange(16)[None, :], "int32")
        self.rows = xp.array([1, 2])
        self.prefix = xp.zeros(2)
        self.extend = xp.array([1, 1])
        self.ids = xp.zeros(2)
        self.positions = xp.zeros(2)
        self.slots = xp.zeros(2)
        self.scratch = xp.zeros(3)

    def launch(self, stream=None):
        kvcanary.launch_canary_plan_kernels(
            verify_plan_out=self.verify, write_plan_out=self.write, req_pool_indices=self.rows,
            prefix_lens=self.prefix, extend_seq_lens=self.extend, req_to_token=self.table,
            verify_capacity=32, verify_offsets_scratch=self.scratch, stream=stream)
        kvcanary.launch_canary_verify_kernel(context=self.state.context(TAG), plan=self.verify,
                                             stream=stream)
        kvcanary.launch_canary_write_kernel(
            context=self.state.context(TAG), plan=self.write, input_ids=self.ids,
            positions=self.positions, out_cache_loc=self.slots, stream=stream)

    def set_inputs(self, position, tokens):
        self.prefix[:] = self.xp.array([position, position])
        self.ids[:] = self.xp.array(tokens)
        self.positions[:] = self.xp.array([position, position])
        self.slots[:] = self.xp.array([16 + position, 32 + position])


def _run_eager(name, steps):
    step = DecodeStep(Backend(name))
    for position, tokens in enumerate(steps):
        step.set_inputs(position, tokens)
        step.launch()
    return step


STEPS = [[11, 21], [12, 22], [13, 23], [14, 24]]


def test_graph_replay_matches_eager_cpu():
    import torch

    reference = _run_eager("numpy", STEPS)
    step = DecodeStep(Backend("cuda"))
    step.set_inputs(0, STEPS[0])
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm-up outside the graph, as engines do
        step.launch()
    torch.cuda.current_stream().wait_stream(side)
    step.state.canary.zero_()  # the capture below replays step 0 again from scratch
    for t in (step.state.ring, step.state.write_index, step.state.slot_run_counter,
              step.state.kernel_run_counter):
        t.zero_()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        step.launch()
    for position, tokens in enumerate(STEPS):
        step.set_inputs(position, tokens)
        graph.replay()
    torch.cuda.synchronize()
    assert step.state.rows() == reference.state.rows() == []
    np.testing.assert_array_equal(step.xp.numpy(step.state.canary),
                                  reference.xp.numpy(reference.state.canary))
    assert step.state.counters() == reference.state.counters() == (8, 0 + 2 + 4 + 6 + 8)

    # Corrupt a record on the device: the next replay's verify reports it.
    step.state.set_field(16 + 1, kvcanary.CANARY_FIELD_POSITION, 99)
    step.set_inputs(4, [15, 25])
    graph.replay()
    torch.cuda.synchronize()
    rows = step.state.rows()
    assert sorted(row[1] for row in rows) == [17, 18]
    assert {row[7] for row in rows} == {2, 1}


def test_default_stream_is_torchs_current_stream():
    import torch

    reference = _run_eager("numpy", STEPS[:2])
    step = DecodeStep(Backend("cuda"))
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        for position, tokens in enumerate(STEPS[:2]):
            step.set_inputs(position, tokens)
            step.launch()  # on `side`, in order with the copies above
    side.synchronize()
    np.testing.assert_array_equal(step.xp.numpy(step.state.canary),
                                  reference.xp.numpy(reference.state.canary))


def test_explicit_stream_argument():
    import torch

    reference = _run_eager("numpy", STEPS[:1])
    step = DecodeStep(Backend("cuda"))
    step.set_inputs(0, STEPS[0])
    torch.cuda.synchronize()
    side = torch.cuda.Stream()
    step.launch(stream=side)
    side.synchronize()
    np.testing.assert_array_equal(step.xp.numpy(step.state.canary),
                                  reference.xp.numpy(reference.state.canary))
