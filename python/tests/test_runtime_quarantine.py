"""kvcanary.runtime quarantine: Config.on_violation and take_affected_requests() over the test
engine, on the CPU, on CUDA and with decode steps replayed from a CUDA graph (runtime_graph.py):
the request whose record was corrupted is named once the report is in, and nothing is named in
mode log."""

import pytest
from runtime_engine import Engine
from runtime_graph import RUNS, Run

from kvcanary import runtime as kvr


def quarantine_run(config, device="cpu", graph=False):
    with Run(device, graph) as run:
        canary = run.install(config, log=lambda level, text: None)
        for _ in range(4):  # with a graph: prefill, warm-up, capture, one replay
            run.step(canary)
        expected = run.engine.corrupt_record(canary, row=2, position=3)
        run.step(canary)  # finds it
        before = canary.take_affected_requests()
        run.step(canary)  # reports it
        assert (run.static is not None) == graph  # a graph run's decode ran its static steps
        assert run.replays == (3 if run.capture else 0)  # steps 4 to 6
        return expected, before, canary.take_affected_requests(), canary


@pytest.mark.parametrize("device, graph", RUNS)
def test_the_corrupted_request_is_named_once_reported(device, graph):
    config = kvr.Config(mode="log", on_violation="quarantine")
    assert config.on_violation == "quarantine"
    expected, before, affected, canary = quarantine_run(config, device, graph)
    assert before == []
    assert [request.req_pool_idx for request in affected] == [2]
    request = affected[0]
    assert request.slots and set(request.slots) <= expected
    assert set(request.positions) <= {3, 4}  # the record, or the next one whose chain reads it
    assert request.fail_reason_bits != 0 and not request.ring_overflow
    assert request.step >= 4
    assert "AffectedRequest(req_pool_idx=2" in repr(request)
    assert canary.take_affected_requests() == []


@pytest.mark.parametrize("device, graph", RUNS)
def test_mode_log_names_nothing(device, graph):
    _, _, affected, canary = quarantine_run(kvr.Config(mode="log"), device, graph)
    assert affected == []
    assert canary.stats()["violations_total"] > 0  # reported, only not kept


def test_on_violation_is_validated():
    with pytest.raises(ValueError, match="on_violation must be one of log/raise/quarantine, got 'x'"):
        kvr.Config(mode="log", on_violation="x")
    with pytest.raises(ValueError, match="on_violation quarantine requires mode log, got mode raise"):
        Engine().install(kvr.Config(mode="raise", on_violation="quarantine"))


def test_config_from_env_reads_on_violation(monkeypatch):
    monkeypatch.setenv("KVCANARY_MODE", "log")
    monkeypatch.setenv("KVCANARY_ON_VIOLATION", "quarantine")
    assert kvr.Config.from_env().on_violation == "quarantine"
