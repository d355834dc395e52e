"""The seeded workload: requests with shared prompt prefixes, arriving over time."""

from __future__ import annotations

import random
from dataclasses import dataclass, field


@dataclass
class Request:
    rid: int
    arrival: int              # the step at which it may be admitted
    prompt: list[int]
    max_new: int
    shared_len: int           # leading prompt tokens shared with other requests of its group
    row: int = 0              # block-table row while running; 0 = none
    blocks: list[int] = field(default_factory=list)  # the allocator's view of its block table
    computed: int = 0         # tokens whose K/V is in the cache
    registered: int = 0       # leading full blocks already offered to the prefix cache
    output: list[int] = field(default_factory=list)
    aborted: bool = False

    @property
    def tokens(self) -> list[int]:
        return self.prompt + self.output

    @property
    def prefilling(self) -> bool:
        return self.computed < len(self.prompt)

    @property
    def remaining(self) -> int:
        return self.max_new - len(self.output)


@dataclass(frozen=True)
class WorkloadConfig:
    requests: int = 24
    groups: int = 3                 # distinct shared prefixes
    shared_len: tuple = (20, 40)    # tokens of a group's prefix
    tail_len: tuple = (3, 20)       # unique prompt tokens after it
    max_new: tuple = (12, 40)
    arrival_span: int = 60          # requests arrive in steps [0, arrival_span)
    vocab: int = 256


def make_workload(config: WorkloadConfig, seed: int) -> list[Request]:
    rng = random.Random(seed)
    prefixes = [[rng.randrange(1, config.vocab) for _ in range(rng.randint(*config.shared_len))]
                for _ in range(config.groups)]
    arrivals = sorted(rng.randrange(config.arrival_span) for _ in range(config.requests))
    requests = []
    for rid, arrival in enumerate(arrivals):
        prefix = prefixes[rng.randrange(config.groups)]
        tail = [rng.randrange(1, config.vocab) for _ in range(rng.randint(*config.tail_len))]
        requests.append(Request(rid=rid, arrival=arrival, prompt=prefix + tail,
                                max_new=rng.randint(*config.max_new), shared_len=len(prefix)))
    return requests
