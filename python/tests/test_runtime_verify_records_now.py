"""CanaryManager.verify_records_now and kvcanary.runtime.walk_of_sequence: an engine's walk of
slots verified in full between steps, as a sweep pass (docs/quarantine.md: with sampled verify, a
finished request's slots before they are freed). On the CPU and on CUDA: a clean walk is checked
and reports nothing, a corrupted record in it is reported by a SWEEP launch, and every bad call
raises a kv-canary error naming its argument, changing nothing."""

import pytest
from runtime_engine import DEVICES, Engine

from kvcanary import runtime as kvr


def started(device, steps=4):
    engine = Engine(device=device)
    canary = engine.install(kvr.Config(mode="log", sweep_interval=0), log=lambda level, text: None)
    canary.mark_init_finished()
    rows = []
    canary.on_violation(lambda row, step: rows.append(row))
    for _ in range(steps):
        engine.step(canary)
    return engine, canary, rows


def sequence_of(engine, row):
    return [engine.slot_of(row, p) for p in range(engine.lengths[row])]


def sweep_checked(canary):
    return canary.stats()["protected_tokens"].get("SWEEP_K_FULL", 0)


def test_walk_of_sequence_chains_each_slot_to_the_one_before():
    assert kvr.walk_of_sequence([7, 3, 9]) == ([7, 3, 9], [0, 1, 2], [-1, 7, 3])
    assert kvr.walk_of_sequence([]) == ([], [], [])
    with pytest.raises(TypeError, match="kv-canary: slots must be a list of ints, got str"):
        kvr.walk_of_sequence("abc")


@pytest.mark.parametrize("device", DEVICES)
def test_a_clean_walk_is_checked_and_reports_nothing(device):
    engine, canary, rows = started(device)
    slots = sequence_of(engine, 2)
    before = sweep_checked(canary)
    canary.verify_records_now(*kvr.walk_of_sequence(slots))
    for _ in range(2):  # reported by the second end_step after the call
        engine.step(canary)
    assert rows == []
    assert sweep_checked(canary) - before == len(slots)


@pytest.mark.parametrize("device", DEVICES)
def test_a_corrupted_record_in_the_walk_is_reported_by_a_sweep_launch(device):
    engine, canary, rows = started(device)
    slots = sequence_of(engine, 3)
    corrupted = engine.corrupt_record(canary, row=3, position=4)
    canary.verify_records_now(*kvr.walk_of_sequence(slots))
    for _ in range(2):
        engine.step(canary)
    sweep_rows = [row for row in rows if row.launch_tag.startswith("SWEEP")]
    assert sweep_rows, rows
    assert {row.slot_idx for row in sweep_rows} <= corrupted


@pytest.mark.parametrize("device", DEVICES)
def test_bad_calls_name_their_argument_and_change_nothing(device):
    engine, canary, rows = started(device)
    before = canary.stats()
    bad = [
        (([1, 2], [0], [-1, 1]), ValueError,
         "slot_indices, positions and prev_slot_indices must have one length, got 2, 1 and 2"),
        (([engine.slots], [0], [-1]), ValueError,
         rf"slot_indices\[0\] must be in \[0, {engine.slots}\), got {engine.slots}"),
        (([1], [0], [-2]), ValueError, r"prev_slot_indices\[0\] must be in \[-1, "),
        (([1], [-1], [-1]), ValueError, r"positions\[0\] must be >= 0, got -1"),
        (([1], "0", [-1]), TypeError, "positions must be a list of ints, got str"),
    ]
    for args, error, message in bad:
        with pytest.raises(error, match="kv-canary: .*" + message):
            canary.verify_records_now(*args)
    assert canary.stats() == before
    batch, host = engine.schedule()
    canary.begin_step([batch], [host])
    with pytest.raises(ValueError, match="kv-canary: verify_records_now called inside a step"):
        canary.verify_records_now([1], [0], [-1])
    canary.pre_forward(0)
    engine.write_kv()
    canary.post_forward(0)
    canary.end_step()
    for _ in range(2):
        engine.step(canary)
    assert rows == []
    assert sweep_checked(canary) == 0
