"""Decode steps as an engine runs them in a torch CUDA graph, for the kvcanary.runtime feature tests
(quarantine, sampled verify, fingerprint layers): the batch lives in static tensors refilled before
every step, and phases 2-3 with the model's KV write are captured once on the runtime's stream, then
replayed (``replayed_forward``). The prefill, whose shape differs, runs eagerly.

``RUNS`` parametrizes a test over (device, graph): eager steps on the CPU and on CUDA, and the
graph's steps. On the CPU (which cannot capture) the graph's static steps run eagerly, so that
every part of them but the capture is tested on a machine without a GPU.
"""

from __future__ import annotations

import contextlib
import inspect

import pytest
from runtime_engine import HAVE_CUDA, Engine, torch

_NEEDS_CUDA = pytest.mark.skipif(not HAVE_CUDA, reason="needs a GPU and kvcanary's CUDA backend")
RUNS = [pytest.param("cpu", False, id="cpu"),
        pytest.param("cpu", True, id="cpu-static"),
        pytest.param("cuda", False, id="cuda", marks=_NEEDS_CUDA),
        pytest.param("cuda", True, id="cuda-graph", marks=_NEEDS_CUDA)]
COLUMNS = ("req_pool_indices", "prefix_lens", "extend_seq_lens", "input_ids", "positions",
           "out_cache_loc")


class Run(contextlib.AbstractContextManager):
    """An Engine and how its steps run; used as a context, in which every torch op and runtime
    launch of a CUDA run goes to one side stream (a graph cannot be captured on the legacy default
    stream, and the runtime's stream is torch's current one at install)."""

    def __init__(self, device, graph, **engine_options):
        self.engine = Engine(device=device, **engine_options)
        self.graph_steps = graph
        self.capture = graph and self.engine.device.type == "cuda"
        self.stream = torch.cuda.Stream(self.engine.device) if device == "cuda" else None
        self.static = None  # the decode batch's columns, captured by address
        self.graph = None
        self.replays = 0
        self._warmed_up = False
        self._context = None

    def __enter__(self):
        if self.stream is not None:
            # The engine zeroed its tensors on torch's default stream, which the side stream does
            # not wait for.
            torch.cuda.synchronize(self.engine.device)
            self._context = torch.cuda.stream(self.stream)
        else:
            self._context = contextlib.nullcontext()
        self._context.__enter__()
        return self

    def __exit__(self, *exc):
        if self.stream is not None:
            self.stream.synchronize()
        return self._context.__exit__(*exc)

    def install(self, config, **overrides):
        if self.graph_steps:
            overrides.setdefault("cuda_graph_max_bs", self.engine.rows - 1)
        if self.capture:
            overrides.setdefault("graph_capture", True)
        return self.engine.install(config, **overrides)

    def step(self, canary):
        """One step: eager, or for a graph run's decode the static step (the first one eager, as
        engines warm up, the second captured and launched, every later one replayed)."""
        columns, host = self.engine.schedule_columns()
        same_shape = len(columns["input_ids"]) == len(columns["req_pool_indices"])
        if not self.graph_steps or not same_shape:
            self.engine.run_step(canary, self.engine.forward_batch(columns), host)
            return
        if self.static is None:
            self.static = {name: columns[name].clone() for name in COLUMNS}
        for name in COLUMNS:
            self.static[name].copy_(columns[name])
        canary.begin_step([self.engine.forward_batch(self.static)], [host])
        if self.graph is not None:
            self.graph.replay()
            canary.replayed_forward(0)
            self.replays += 1
        elif self.capture and self._warmed_up:
            self._capture(canary)
            self.graph.replay()
        else:
            self._forward(canary)
            self._warmed_up = True
        canary.end_step()

    def _forward(self, canary):
        canary.pre_forward(0)
        self.engine.write_kv(self.static["input_ids"], self.static["out_cache_loc"])
        canary.post_forward(0)

    def _capture(self, canary):
        self.graph = torch.cuda.CUDAGraph()
        options = {}
        if "capture_error_mode" in inspect.signature(torch.cuda.graph).parameters:
            options["capture_error_mode"] = "thread_local"  # as the C++ graph tests capture
        with torch.cuda.graph(self.graph, stream=self.stream, **options):
            self._forward(canary)


def steps(run, canary, count):
    """`count` steps of `run` (a Run or an Engine); returns the violation rows the listener saw."""
    rows = []
    canary.on_violation(lambda row, step: rows.append(row))
    for _ in range(count):
        run.step(canary)
    return rows
