"""kvcanary.runtime's counters: stats() and metrics() move as steps run and violations are
reported, and the prometheus_client collector exposes the same values."""

import re

import pytest
from runtime_engine import Engine

from kvcanary import runtime as kvr

TAGS = ["HEAD_K_FULL", "HEAD_V_FULL", "TAIL_K_FULL", "TAIL_V_FULL", "SWEEP_K_FULL", "SWEEP_V_FULL",
        "HEAD_K_SWA", "HEAD_V_SWA", "TAIL_K_SWA", "TAIL_V_SWA", "SWEEP_K_SWA", "SWEEP_V_SWA"]


def sample(text, name, tag=None):
    """The value of one sample of Prometheus text."""
    labels = re.escape(f'{{launch_tag="{tag}"}}') if tag else ""
    match = re.search(rf"^{name}{labels} (-?\d+)$", text, re.MULTILINE)
    assert match, f"{name} {tag} not in the text"
    return int(match.group(1))


@pytest.fixture
def corrupted():
    """A runtime in mode log whose record of request 1, position 2 was corrupted after step 2,
    then ran 3 more steps; returns the runtime and the steps' counts before the corruption."""
    engine = Engine()
    canary = engine.install(kvr.Config(mode="log"), log=lambda level, text: None)
    for _ in range(2):
        engine.step(canary)
    clean = canary.stats()
    engine.corrupt_record(canary, row=1, position=2)
    for _ in range(3):
        engine.step(canary)
    return canary, clean


def test_stats_of_clean_steps(corrupted):
    _, clean = corrupted
    assert set(clean["kernel_runs"]) == set(TAGS)
    for tag in ["HEAD_K_FULL", "TAIL_K_FULL"]:
        assert clean["kernel_runs"][tag] >= 1
    # V launches only with enable_mha_v; no SWA group; no sweep.
    for tag in ["HEAD_V_FULL", "TAIL_V_FULL", "HEAD_K_SWA", "SWEEP_K_FULL"]:
        assert clean["kernel_runs"][tag] == 0
    assert clean["protected_tokens"]["TAIL_K_FULL"] > 0
    assert clean["violations_total"] == clean["rows_reported"] == 0
    assert clean["last_violation_step"] == -1 and clean["ring_overflow"] is False


def test_stats_after_a_violation(corrupted):
    canary, clean = corrupted
    stats = canary.stats()
    assert stats["violations_total"] >= 1
    assert stats["rows_reported"] == sum(stats["violations_by_tag"].values()) >= 1
    assert stats["violations_by_tag"]["TAIL_K_FULL"] >= 1
    assert 2 < stats["last_violation_step"] <= canary.outer_step
    for tag, runs in stats["kernel_runs"].items():
        assert runs >= clean["kernel_runs"][tag]
    assert stats["protected_tokens"]["TAIL_K_FULL"] > clean["protected_tokens"]["TAIL_K_FULL"]


def test_metrics_text_matches_stats(corrupted):
    canary, _ = corrupted
    stats, text = canary.stats(), canary.metrics()
    assert sample(text, "kvcanary_violations_total") == stats["violations_total"]
    assert sample(text, "kvcanary_rows_reported_total") == stats["rows_reported"]
    assert sample(text, "kvcanary_last_violation_step") == stats["last_violation_step"]
    for tag in TAGS:
        assert sample(text, "kvcanary_kernel_runs_total", tag) == stats["kernel_runs"][tag]


def test_prometheus_collector(corrupted):
    prometheus_client = pytest.importorskip("prometheus_client")
    canary, _ = corrupted
    registry = prometheus_client.CollectorRegistry()
    collector = kvr.PrometheusCollector(canary, registry=registry)
    stats = canary.stats()
    assert registry.get_sample_value("kvcanary_violations_total") == stats["violations_total"]
    tail_k = {"launch_tag": "TAIL_K_FULL"}
    assert registry.get_sample_value("kvcanary_protected_tokens_total",
                                     tail_k) == stats["protected_tokens"]["TAIL_K_FULL"]
    assert registry.get_sample_value("kvcanary_ring_overflow") == 0
    text = prometheus_client.generate_latest(registry).decode()
    assert "# TYPE kvcanary_violations_total counter" in text
    assert "# TYPE kvcanary_last_violation_step gauge" in text
    registry.unregister(collector)
    assert registry.get_sample_value("kvcanary_violations_total") is None


def test_prometheus_collector_follows_the_runtime_weakly():
    prometheus_client = pytest.importorskip("prometheus_client")
    engine = Engine()
    canary = engine.install(kvr.Config(mode="log"), log=lambda level, text: None)
    registry = prometheus_client.CollectorRegistry()
    kvr.PrometheusCollector(canary, registry=registry)
    engine.step(canary)
    engine.step(canary)
    head_k = {"launch_tag": "HEAD_K_FULL"}
    assert registry.get_sample_value("kvcanary_kernel_runs_total", head_k) >= 1
    del canary
    assert registry.get_sample_value("kvcanary_violations_total") is None
