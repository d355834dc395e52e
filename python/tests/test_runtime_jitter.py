"""kvcanary.runtime with the timing-jitter fuzzer (Config.jitter_*, docs/integration.md): at
probability 1 every step fires its four points in order, each reported to the perturbation listener
with the step and its ticks, on the CPU, on CUDA and with decode steps replayed from a torch CUDA
graph (whose captured spins read the ticks each begin_step copies in); the spins change nothing the
canary checks: a clean run reports nothing and a corrupted record is still reported."""

import pytest
from runtime_graph import RUNS, Run, steps

from kvcanary import runtime as kvr

POINTS = ["jitter_pre_head", "jitter_post_head", "jitter_post_attn", "jitter_post_tail"]


@pytest.mark.parametrize("device, graph", RUNS)
def test_every_step_fires_the_four_points_in_order_and_detection_is_unchanged(device, graph):
    with Run(device, graph, context=64) as run:
        canary = run.install(kvr.Config(mode="log", jitter_enabled=True,
                                        jitter_per_slot_fire_prob=1.0, jitter_max_cycles=20000,
                                        jitter_seed=5))
        canary.mark_init_finished()
        events = []
        canary.on_perturbation(events.append)
        assert steps(run, canary, 12) == []
        assert [event.kind for event in events] == POINTS * 12
        assert [event.step for event in events] == [step for step in range(12) for _ in POINTS]
        assert all(1 <= event.replacement <= 20000 for event in events)
        assert len({event.replacement for event in events}) > 4  # drawn anew every step
        slots = run.engine.corrupt_record(canary, 1, 3)
        rows = steps(run, canary, 3)
        assert rows and {row.slot_idx for row in rows} <= slots


def test_probability_zero_never_fires():
    with Run("cpu", False, context=64) as run:
        canary = run.install(kvr.Config(mode="log", jitter_enabled=True,
                                        jitter_per_slot_fire_prob=0.0))
        events = []
        canary.on_perturbation(events.append)
        assert steps(run, canary, 6) == []
        assert events == []
