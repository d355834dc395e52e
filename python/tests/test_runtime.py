"""kvcanary.runtime: install in every mode, clean steps, corruption caught (listener, log and
CorruptionError), the step protocol's order, tensors kept alive, callbacks that raise, the radix
view and the shared canary buffer. CPU torch tensors; the CUDA case skips without a GPU."""

import gc
import threading
import weakref

import numpy as np

import pytest
from runtime_engine import Engine, torch

import kvcanary
from kvcanary import runtime as kvr

HAVE_CUDA = torch.cuda.is_available() and kvcanary._kvcanary.HAVE_CUDA


def run_clean(engine, canary, steps=5):
    rows = []
    canary.on_violation(lambda row, step: rows.append(row))
    for _ in range(steps):
        engine.step(canary)
    return rows


def test_mode_none_installs_nothing():
    assert Engine().install(kvr.Config(mode="none")) is None


@pytest.mark.parametrize("mode", ["log", "raise"])
@pytest.mark.parametrize("real_data", ["none", "partial", "all"])
@pytest.mark.parametrize("fused_verify", [True, False])
def test_clean_steps_report_nothing(mode, real_data, fused_verify):
    engine = Engine()
    canary = engine.install(kvr.Config(mode=mode, real_data=real_data, fused_verify=fused_verify))
    canary.mark_init_finished()
    assert run_clean(engine, canary) == []
    stats = canary.stats()
    assert stats["violations_total"] == 0 and stats["rows_reported"] == 0
    assert canary.outer_step == 5
    assert stats["protected_tokens"]["TAIL_K_FULL"] > 0
    # No SWA group: the SWA divergence report never runs (its fields are there, at 0).
    assert stats["swa_divergence_reports"] == 0 and stats["swa_record_mismatches"] == 0


def test_config_from_env(monkeypatch):
    monkeypatch.setenv("KVCANARY_MODE", "raise")
    monkeypatch.setenv("KVCANARY_REAL_DATA", "all")
    monkeypatch.setenv("KVCANARY_RING_CAPACITY", "64")
    monkeypatch.setenv("KVCANARY_FUSED_VERIFY", "0")
    config = kvr.Config.from_env()
    assert (config.mode, config.real_data, config.ring_capacity) == ("raise", "all", 64)
    assert config.fused_verify is False
    engine = Engine()
    assert run_clean(engine, engine.install(config)) == []
    monkeypatch.setenv("KVCANARY_RING_CAPACITY", "lots")
    with pytest.raises(ValueError, match="kv-canary: KVCANARY_RING_CAPACITY must be an integer"):
        kvr.Config.from_env()


def test_env_mode_none_installs_nothing(monkeypatch):
    monkeypatch.delenv("KVCANARY_MODE", raising=False)
    assert Engine().install(kvr.Config.from_env()) is None


def test_corrupted_record_caught_in_mode_log():
    engine = Engine()
    lines = []
    canary = engine.install(kvr.Config(mode="log"),
                            log=lambda level, text: lines.append((level, text)))
    rows = run_clean(engine, canary, steps=2)
    expected = engine.corrupt_record(canary, row=1, position=2)
    for _ in range(3):
        engine.step(canary)
    assert rows, "the corruption was not reported"
    assert {row.slot_idx for row in rows} <= expected
    assert all(row.launch_tag.endswith("_K_FULL") and row.step > 2 for row in rows)
    assert rows[0].fail_reasons == "verify_chain_hash"
    warnings = [text for level, text in lines if level == "WARNING"]
    assert any(f"slot_idx={rows[0].slot_idx}" in text for text in warnings)


def test_corrupted_record_raises_in_mode_raise():
    engine = Engine()
    canary = engine.install(kvr.Config(mode="raise"), log=lambda level, text: None)
    run_clean(engine, canary, steps=2)
    expected = engine.corrupt_record(canary, row=2, position=3)
    with pytest.raises(kvcanary.CorruptionError) as caught:
        for _ in range(3):
            engine.step(canary)
    error = caught.value
    assert isinstance(error, RuntimeError)
    assert error.rows and {row.slot_idx for row in error.rows} <= expected
    assert f"slot_idx={error.rows[0].slot_idx}" in str(error)
    assert "kv_canary violation: launch_tag=" in str(error)


@pytest.mark.parametrize("half", ["k", "v"])
def test_real_kv_flip_in_a_vllm_layer_is_caught(half):
    engine = Engine(layout="vllm", block_size=4)
    canary = engine.install(kvr.Config(mode="log", real_data="all", enable_mha_v=True),
                            log=lambda level, text: None)
    assert run_clean(engine, canary, steps=3) == []
    slot = engine.slot_of(1, 1)
    layer = engine.k if half == "k" else engine.v
    engine.kv_of(layer, slot)[1, 3] += 7.0  # one value of one head, as a stray write would
    rows = []
    canary.on_violation(lambda row, step: rows.append(row))
    for _ in range(3):
        engine.step(canary)
    assert rows and all(row.slot_idx == slot for row in rows)
    assert "verify_real_kv_hash" in rows[0].fail_reasons


def test_phase_order_errors_change_nothing():
    engine = Engine()
    canary = engine.install(kvr.Config(mode="raise"))
    canary.mark_init_finished()  # the phase checker runs from here on
    with pytest.raises(ValueError, match="kv-canary: inner forward 0 is not active"):
        canary.pre_forward(0)
    with pytest.raises(ValueError, match="kv-canary: end_step called without begin_step"):
        canary.end_step()
    batch, host = engine.schedule()
    canary.begin_step([batch], [host])
    with pytest.raises(ValueError, match="kv-canary: per-forward phase mismatch"):
        canary.post_forward(0)
    with pytest.raises(ValueError, match="kv-canary: per-forward phase mismatch"):
        canary.begin_step([batch], [host])
    canary.pre_forward(0)
    engine.write_kv()
    canary.post_forward(0)
    canary.end_step()
    assert canary.outer_step == 1
    assert run_clean(engine, canary, steps=3) == []


def test_abandoned_step_can_be_described_again():
    engine = Engine()
    canary = engine.install(kvr.Config(mode="raise"))
    batch, host = engine.schedule()
    canary.begin_step([batch], [host])
    canary.abandon_step()
    canary.begin_step([batch], [host])
    canary.pre_forward(0)
    engine.write_kv()
    canary.post_forward(0)
    canary.end_step()
    assert run_clean(engine, canary, steps=3) == []


def test_tensors_live_as_long_as_the_runtime_reads_them():
    engine = Engine()
    canary = engine.install(kvr.Config(mode="raise", real_data="all"))
    table, k = engine.req_to_token, engine.k
    del engine.req_to_token, engine.k, engine.v
    gc.collect()
    engine.req_to_token, engine.k, engine.v = table, k, torch.zeros_like(k)  # the engine's own
    for _ in range(3):
        batch, host = engine.schedule()
        canary.begin_step([batch], [host])
        del batch, host
        gc.collect()
        # Memory the freed batch tensors held, reused: the runtime must still read its own.
        junk = [torch.full((64,), 7, dtype=torch.int64) for _ in range(64)]
        canary.pre_forward(0)
        engine.write_kv()
        canary.post_forward(0)
        canary.end_step()
        del junk
    assert canary.stats()["violations_total"] == 0


def test_a_raising_listener_is_raised_at_the_call_site():
    engine = Engine()
    canary = engine.install(kvr.Config(mode="log"), log=lambda level, text: None)
    run_clean(engine, canary, steps=2)
    engine.corrupt_record(canary, row=1, position=2)
    canary.on_violation(lambda row, step: 1 / 0)
    with pytest.raises(ZeroDivisionError):
        for _ in range(3):
            engine.step(canary)
    canary.on_violation(None)
    for _ in range(2):
        engine.step(canary)  # the runtime is intact
    assert canary.stats()["rows_reported"] >= 1


def test_a_raising_log_callable_is_raised_at_the_call_site():
    def log(level, text):
        raise KeyError(level)

    with pytest.raises(KeyError, match="INFO"):
        Engine().install(kvr.Config(mode="log"), log=log)


class Radix:
    """A one-branch prefix tree over request 1's first `length` slots; `fail` raises in children."""

    def __init__(self, engine, length, fail=False):
        self.slots = [engine.slot_of(1, p) for p in range(length)]
        self.fail = fail

    def root(self):
        return 0

    def children(self, node):
        if self.fail:
            raise LookupError("children")
        return [1] if node == 0 else []

    def key_length(self, node):
        return len(self.slots)

    def device_slots(self, node):
        return self.slots

    def is_locked(self, node, swa_component):
        return False

    def is_swa_resident(self, node):
        return True


def test_radix_view_is_swept_and_its_errors_raised():
    engine = Engine()
    canary = engine.install(kvr.Config(mode="raise", sweep_interval=1),
                            log=lambda level, text: None)
    run_clean(engine, canary, steps=2)
    canary.attach_radix_cache(Radix(engine, 5))
    gc.collect()  # the runtime keeps the view
    passes = canary.sweep_passes
    run_clean(engine, canary, steps=2)
    assert canary.sweep_passes > passes
    canary.attach_radix_cache(Radix(engine, 5, fail=True))
    with pytest.raises(LookupError):
        engine.step(canary)
    canary.attach_radix_cache(None)
    run_clean(engine, canary, steps=1)


def test_canary_buffer_shares_the_runtime_memory():
    engine = Engine()
    canary = engine.install(kvr.Config(mode="log"))
    run_clean(engine, canary, steps=1)
    head = canary.canary_buffer("full", False, False)
    assert head.shape == (engine.slots, 32) and head.dtype == torch.uint8
    slot = engine.slot_of(1, 0)
    assert head[slot].any()
    head[slot, 0] ^= 0xFF
    assert canary.canary_buffer("full", False, False)[slot, 0] == head[slot, 0]
    del canary
    gc.collect()
    assert head.shape == (engine.slots, 32) and int(head[slot, 0]) >= 0  # kept its owner alive


def test_sizes():
    engine = Engine()
    canary = engine.install(kvr.Config(mode="log"))
    assert canary.record_bytes == 4 * engine.slots * 32  # K and V, HEAD and TAIL
    assert canary.device_bytes > canary.record_bytes
    capacities = canary.capacities
    assert capacities.write_entry_capacity >= 64 and capacities.write_req_capacity >= 4
    forced = kvr.Capacities(verify_capacity=64, write_req_capacity=8, write_entry_capacity=64)
    smaller = engine.install(kvr.Config(mode="log"), capacities=forced)
    assert smaller.capacities.verify_capacity == 64


@pytest.mark.skipif(not HAVE_CUDA, reason="needs a GPU and kvcanary's CUDA backend")
def test_cuda_clean_steps_and_corruption():
    engine = Engine(device="cuda", layout="vllm")
    canary = engine.install(kvr.Config(mode="raise", real_data="all"))
    assert run_clean(engine, canary) == []
    engine.corrupt_record(canary, row=1, position=2)
    with pytest.raises(kvcanary.CorruptionError):
        for _ in range(3):
            engine.step(canary)


def test_paged_layer_bytes_views_pages_without_a_copy():
    kv = torch.zeros(2, 5, 4, 2, 8, dtype=torch.bfloat16)  # vLLM: [2, blocks, block, heads, dim]
    pages = kvr.paged_layer_bytes(kv[1])
    assert pages.shape == (5, 4 * 2 * 8 * 2) and pages.dtype == torch.uint8
    pages[3, 0] = 0x80  # the low byte of block 3, token 0, head 0, element 0
    assert kv[1, 3, 0, 0, 0].view(torch.int16) == 0x80 and not kv[0].any()
    array = np.zeros((6, 3, 2), dtype=np.float32)
    assert kvr.paged_layer_bytes(array).shape == (6, 24)
    kvr.paged_layer_bytes(array)[2, 4] = 1
    assert array[2, 0, 1] != 0
    with pytest.raises(ValueError, match="kv-canary: tensor must have dense dims after the first"):
        kvr.paged_layer_bytes(kv[1].transpose(1, 2))
    with pytest.raises(ValueError, match="kv-canary: tensor must have dense dims after the first"):
        kvr.paged_layer_bytes(array.transpose(0, 2, 1))


def test_a_listener_may_read_the_runtime_but_not_drive_it():
    engine = Engine()
    canary = engine.install(kvr.Config(mode="log"), log=lambda level, text: None)
    run_clean(engine, canary, steps=2)
    engine.corrupt_record(canary, row=1, position=2)
    seen = []
    canary.on_violation(lambda row, step: seen.append((canary.stats()["rows_reported"],
                                                       canary.outer_step)))
    for _ in range(3):
        engine.step(canary)
    # Read while the reporter runs: each row is counted before the listener sees it, at the step
    # the pump runs in (the corruption after step 2 is reported by step 4's end_step).
    assert seen[:2] == [(1, 4), (2, 4)]
    canary.on_violation(lambda row, step: canary.abandon_step())
    with pytest.raises(ValueError, match="kv-canary: a callback must not drive the CanaryManager"):
        engine.step(canary)


def test_a_second_thread_is_refused_while_a_call_runs():
    engine = Engine()
    canary = engine.install(kvr.Config(mode="log", sweep_interval=1), log=lambda level, text: None)
    run_clean(engine, canary, steps=2)
    inside, done = threading.Event(), threading.Event()

    class SlowRadix(Radix):
        def children(self, node):
            inside.set()
            done.wait(10)  # releases the GIL: the main thread runs meanwhile
            return super().children(node)

    canary.attach_radix_cache(SlowRadix(engine, 3))
    worker = threading.Thread(target=engine.step, args=(canary,))
    worker.start()
    try:
        assert inside.wait(10)
        with pytest.raises(ValueError, match="kv-canary: CanaryManager is busy in another thread"):
            canary.stats()
        with pytest.raises(ValueError, match="kv-canary: CanaryManager is busy in another thread"):
            canary.abandon_step()
    finally:
        done.set()
        worker.join(10)
    assert canary.outer_step == 3 and canary.stats()["violations_total"] == 0


def test_a_runtime_in_a_cycle_with_its_callbacks_is_collected():
    engine = Engine()
    canary = engine.install(kvr.Config(mode="log", sweep_interval=1), log=lambda level, text: None)
    run_clean(engine, canary, steps=2)
    radix = Radix(engine, 3)
    radix.canary = canary  # view -> runtime -> view
    canary.attach_radix_cache(radix)
    canary.on_violation(lambda row, step: canary.stats())  # runtime -> listener -> runtime
    engine.step(canary)
    alive = weakref.ref(canary)
    del canary, radix
    gc.collect()
    assert alive() is None
