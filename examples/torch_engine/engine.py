"""The serving loop: schedule, inject, run the model between the canary's hooks, sample."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

import torch

from .canary import Canary
from .faults import FaultInjector, Injection
from .model import Forward, ModelConfig, TinyDecoder
from .scheduler import EngineConfig, Scheduler
from .workload import Request, WorkloadConfig, make_workload


@dataclass(frozen=True)
class RunConfig:
    device: str = "cpu"
    seed: int = 0
    steps: int = 110
    canary: bool = True
    real_data: str = "all"
    faults: tuple = ()
    verbose: bool = False  # the runtime's log lines on stderr as they come


@dataclass
class RunResult:
    config: RunConfig
    requests: list[Request]
    injections: list[Injection]
    false_positives: list = field(default_factory=list)
    violations: int = 0
    steps: int = 0
    forwards: int = 0
    cache_hits: int = 0
    evictions: int = 0
    canary_stats: Optional[dict] = None
    canary_log: list = field(default_factory=list)

    @property
    def tokens_generated(self) -> int:
        return sum(len(r.output) for r in self.requests)


def run(config: RunConfig) -> RunResult:
    device = torch.device(config.device)
    engine_config = EngineConfig()
    model = TinyDecoder(ModelConfig(), config.seed, device)
    requests = make_workload(WorkloadConfig(), config.seed)
    sched = Scheduler(engine_config, requests, device)
    kv_caches = model.new_kv_cache(engine_config.num_blocks, engine_config.block_size, device)
    canary = None
    if config.canary:
        canary = Canary(sched.block_table, kv_caches, engine_config.block_size,
                        engine_config.token_budget, config.real_data, config.verbose)
    injector = FaultInjector(list(config.faults), config.steps, config.seed, config.real_data)
    result = RunResult(config, requests, injector.injections)
    for step in range(config.steps):
        if sched.done():
            break
        result.steps = step + 1
        sched.admit(step)
        plan = sched.plan_forward()
        if not plan.rows:
            continue  # nothing admitted yet: no forward, nothing to check
        injector.before_forward(step, plan, sched, kv_caches)
        rows = _forward(model, sched, plan, kv_caches, canary, step)
        result.forwards += 1
        result.violations += len(rows)
        injector.after_forward(step, rows, sched)
    if canary is not None:  # the last forward's rows are reported by one more (empty) step
        rows = canary.drain()
        result.violations += len(rows)
        injector.after_forward(result.steps, rows, sched)
    result.false_positives = injector.false_positives
    result.cache_hits, result.evictions = sched.pool.hits, sched.pool.evictions
    if canary is not None:
        result.canary_stats, result.canary_log = canary.stats(), canary.log_lines
    return result


def _forward(model: TinyDecoder, sched: Scheduler, plan, kv_caches: list[torch.Tensor],
             canary: Optional[Canary], step: int) -> list:
    """One forward between the canary's hooks; returns the violation rows reported in it."""
    device = sched.block_table.device
    sched.commit_table(plan)
    fwd = Forward(
        input_ids=torch.tensor(plan.input_ids, dtype=torch.int64, device=device),
        positions=torch.tensor(plan.positions, dtype=torch.int64, device=device),
        slot_mapping=torch.tensor(plan.slot_mapping, dtype=torch.int64, device=device),
        rows=[(req.row, prefix, extend) for req, prefix, extend in plan.rows])
    if canary is not None:
        canary.begin(plan, fwd.input_ids, fwd.positions, fwd.slot_mapping)
    logits = model.forward(fwd, kv_caches, sched.block_table, [i for _, i in plan.samplers])
    rows = canary.end() if canary is not None else []
    sched.apply(plan, logits.argmax(-1).tolist(), step)  # greedy sampling
    return rows
