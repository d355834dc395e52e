"""launch_spin_wait_kernel: the keyword-only launcher, its four messages in order (a refused call
changes nothing), the CPU no-op, and on CUDA a spin inside a torch CUDA graph that replays with the
value the tensor holds at each replay."""

import inspect
import time

import numpy as np
import pytest
from conftest import HAVE_CUDA, FakeTensor, assert_raises_unchanged

import kvcanary
import kvcanary.runtime as kvr

PREFIX = "kv-canary: jitter: cycles "


def test_spin_wait_launcher_is_keyword_only_and_exported():
    from kvcanary.spin_wait import launch_spin_wait_kernel
    assert launch_spin_wait_kernel is kvcanary.launch_spin_wait_kernel
    parameters = inspect.signature(launch_spin_wait_kernel).parameters
    assert list(parameters) == ["cycles", "stream"]
    assert all(p.kind is inspect.Parameter.KEYWORD_ONLY for p in parameters.values())
    with pytest.raises(TypeError):
        launch_spin_wait_kernel(np.zeros(1, np.int64))


def test_spin_wait_on_cpu_is_a_no_op_whatever_the_ticks(host_xp):
    for ticks in (-1, 0, 1, 2**62):
        cycles = host_xp.array([ticks])
        start = time.monotonic()
        kvcanary.launch_spin_wait_kernel(cycles=cycles)
        assert time.monotonic() - start < 0.5
        assert host_xp.tolist(cycles) == [ticks]


def test_spin_wait_messages_in_order(xp):
    good = xp.array([5, 6, 7])
    cases = [
        (None, "kv-canary: cycles is required, got None"),
        (xp.array([5], "int32"), PREFIX + "must be int64, got torch.int32"),
        (FakeTensor([1], "int32", device_type=8), PREFIX + "must be int64, got torch.int32"),
        (FakeTensor([1], device_type=8), PREFIX + "must live on CUDA, got dlpack_device_8:0"),
        (good[::2], PREFIX + "must be contiguous"),
        (good[:2], PREFIX + "must have shape [1], got (2,)"),
        (good[:0], PREFIX + "must have shape [1], got (0,)"),
        (xp.zeros((1, 1)), PREFIX + "must have shape [1], got (1, 1)"),
    ]
    for cycles, message in cases:
        assert_raises_unchanged(
            xp, lambda: kvcanary.launch_spin_wait_kernel(cycles=cycles), message, [good])


@pytest.mark.skipif(not HAVE_CUDA, reason="needs a CUDA device and kvcanary's CUDA backend")
def test_a_captured_spin_wait_replays_with_the_current_value():
    import torch

    cycles = torch.zeros(1, dtype=torch.int64, device="cuda")
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        kvcanary.launch_spin_wait_kernel(cycles=cycles)

    def replay_ms(ticks):
        cycles.fill_(ticks)
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        return start.elapsed_time(end)

    replay_ms(0)  # warm-up
    quick = replay_ms(0)
    slow = replay_ms(20_000_000)  # >= 10 ms at any clock below 2 GHz
    assert slow > 5.0 and slow > 10 * quick
    assert replay_ms(-5) < slow / 10


def test_runtime_config_takes_the_jitter_settings():
    config = kvr.Config(mode="log", jitter_enabled=True, jitter_per_slot_fire_prob=0.25,
                        jitter_max_cycles=4096, jitter_seed=2**64 - 1)
    assert (config.jitter_enabled, config.jitter_per_slot_fire_prob) == (True, 0.25)
    assert (config.jitter_max_cycles, config.jitter_seed) == (4096, 2**64 - 1)
    assert kvr.Config().jitter_max_cycles == 100000
    with pytest.raises(ValueError,
                       match=r"jitter_enabled requires mode in \{log, raise\}, got mode none"):
        kvr.Config(mode="none", jitter_enabled=True)
    with pytest.raises(ValueError, match=r"jitter_max_cycles must be in \[1, 100000000\], got 0"):
        kvr.Config(mode="log", jitter_max_cycles=0)
