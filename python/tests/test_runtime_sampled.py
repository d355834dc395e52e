"""kvcanary.runtime with sampled verify (Config.verify_sample, docs/sampled_verify.md): a clean run
reports nothing and checks fewer records than the full verify; a corrupted record is reported
within K + 1 steps, on the CPU, on CUDA and with decode steps replayed from a CUDA graph (whose
captured TAIL advances the sampling phases on the device), whether each verify derives its entries
or HEAD stores them for both (Config.verify_entries); the rate is range-checked like every
integer setting."""

import pytest
from runtime_engine import Engine
from runtime_graph import RUNS, Run, steps

from kvcanary import runtime as kvr


def protected_tokens(sample, steps=40):
    engine = Engine(context=64)
    canary = engine.install(kvr.Config(mode="log", verify_sample=sample))
    canary.mark_init_finished()
    rows = []
    canary.on_violation(lambda row, step: rows.append(row))
    for _ in range(steps):
        engine.step(canary)
    assert rows == []
    return canary.stats()["protected_tokens"]["TAIL_K_FULL"]


def test_clean_sampled_run_reports_nothing_and_checks_fewer_records():
    assert protected_tokens(4) < protected_tokens(1) * 0.7


@pytest.mark.parametrize("device, graph", RUNS)
@pytest.mark.parametrize("position", [0, 5, 17])
@pytest.mark.parametrize("entries", ["derive", "store"])
def test_corrupted_record_is_reported_within_k_steps(position, device, graph, entries):
    with Run(device, graph, context=64) as run:
        canary = run.install(kvr.Config(mode="log", verify_sample=4, verify_entries=entries))
        canary.mark_init_finished()
        assert steps(run, canary, 20) == []
        slots = run.engine.corrupt_record(canary, 1, position)
        rows = []
        canary.on_violation(lambda row, step: rows.append(row))
        for _ in range(5):  # K + 1
            run.step(canary)
            if rows:
                break
        assert rows, "not reported within K + 1 steps"
        assert {row.slot_idx for row in rows} <= slots
        assert run.replays >= (17 if run.capture else 0)  # 20 steps: prefill, warm-up, capture


def test_verify_sample_is_range_checked(monkeypatch):
    assert kvr.Config().verify_sample == 1
    monkeypatch.setenv("KVCANARY_VERIFY_SAMPLE", "8")
    assert kvr.Config.from_env().verify_sample == 8
    monkeypatch.setenv("KVCANARY_VERIFY_SAMPLE", "0")
    with pytest.raises(ValueError, match=r"KVCANARY_VERIFY_SAMPLE must be in \[1, 65536\], got 0"):
        kvr.Config.from_env()


def test_verify_entries_is_one_of_three(monkeypatch):
    assert kvr.Config().verify_entries == "auto"
    monkeypatch.setenv("KVCANARY_VERIFY_ENTRIES", "STORE")
    assert kvr.Config.from_env().verify_entries == "store"
    with pytest.raises(ValueError, match="verify_entries must be one of auto/derive/store, got 'x'"):
        kvr.Config(verify_entries="x")
