"""kvcanary.runtime.GroupSpec.compress_ratio / full_to_compressed (docs/integration.md, "Compressed
pools"): the full group as a compressed pool whose slot c holds what full slots [c * r, c * r + r)
compress to, reached through the table from the slot closing it; a clean run reports nothing, a
wrong table entry is reported at the compressed slot it names, and a bad description is refused."""

import re

import pytest

from kvcanary import runtime as kvr
from runtime_engine import Engine, torch
from runtime_graph import steps

CONFIG = dict(mode="log", real_data="partial")
RATIO = 4


def _compressed_group(engine):
    """The full group over a compressed pool of fixed bytes, each full slot s with
    (s + 1) % RATIO == 0 mapped to compressed slot s // RATIO, as a DeepSeek-V4 pool does."""
    slots = engine.slots // RATIO + 1
    generator = torch.Generator().manual_seed(3)
    pool = torch.randint(0, 256, (slots, 32), dtype=torch.uint8, generator=generator)
    table = torch.zeros(engine.slots + 1, dtype=torch.int64)
    closing = torch.arange(RATIO - 1, engine.slots + 1, RATIO)
    table[closing] = closing // RATIO
    group = kvr.GroupSpec(kind="full", num_slots=slots, k_layer0=pool, compress_ratio=RATIO,
                          full_to_compressed=table)
    return group, table


def test_the_fields_default_to_an_ordinary_pool():
    spec = kvr.GroupSpec()
    assert (spec.compress_ratio, spec.full_to_compressed) == (1, None)


def test_a_clean_run_is_silent_and_a_wrong_table_entry_is_reported():
    engine = Engine()
    group, table = _compressed_group(engine)
    lines = []
    canary = engine.install(kvr.Config(**CONFIG), groups=[group],
                            log=lambda level, text: lines.append(text))
    assert any("buffer_group_kinds=[FULL(compressed x4)]" in line for line in lines)
    assert steps(engine, canary, 4) == []
    # A closing slot of request 1 now names the compressed slot another slot closes.
    closing = next(engine.slot_of(1, p) for p in range(8) if (engine.slot_of(1, p) + 1) % RATIO == 0)
    wrong = int(table[closing]) + 1
    table[closing] = wrong
    rows = steps(engine, canary, 2)
    assert rows and all(row.slot_idx == wrong for row in rows)
    assert "verify_position" in rows[0].fail_reasons


def test_a_table_of_the_wrong_length_is_refused():
    engine = Engine()
    group, table = _compressed_group(engine)
    group.full_to_compressed = table[:-1].clone()
    message = ("kv-canary: group FULL full_to_compressed must be a contiguous torch.int64 "
               f"[pool_slot_count + 1 = {engine.slots + 1}] on cpu, got torch.int64 "
               f"[{engine.slots}] on cpu")
    with pytest.raises(ValueError, match="^" + re.escape(message) + "$"):
        engine.install(kvr.Config(**CONFIG), groups=[group])
