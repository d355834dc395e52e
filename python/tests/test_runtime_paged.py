"""kvcanary.runtime over paged block tables (block_table[row, i]; the slot of a position is
block * block_size + offset) and real-KV fingerprints folded over several layers (k_layers,
v_layers): clean steps, corruption caught, and refused arguments that change nothing."""

import re

import pytest
from runtime_engine import Engine, torch
from runtime_graph import steps

import kvcanary
from kvcanary import runtime as kvr


@pytest.mark.parametrize("mode", ["log", "raise"])
@pytest.mark.parametrize("real_data", ["none", "all"])
@pytest.mark.parametrize("layout", ["rows", "vllm"])
def test_clean_steps_over_a_block_table(mode, real_data, layout):
    engine = Engine(table="blocks", layout=layout, block_size=4)
    canary = engine.install(kvr.Config(mode=mode, real_data=real_data, enable_mha_v=True),
                            log=lambda level, text: None)
    canary.mark_init_finished()
    assert steps(engine, canary, 6) == []
    assert engine.next_block > 4  # the rows crossed block boundaries
    assert canary.stats()["protected_tokens"]["TAIL_K_FULL"] > 0


def test_corruption_caught_over_a_block_table():
    engine = Engine(table="blocks", block_size=4)
    canary = engine.install(kvr.Config(mode="raise"), log=lambda level, text: None)
    assert steps(engine, canary, 2) == []
    expected = engine.corrupt_record(canary, row=2, position=3)  # the last slot of a block
    with pytest.raises(kvcanary.CorruptionError) as caught:
        steps(engine, canary, 3)
    assert caught.value.rows and {row.slot_idx for row in caught.value.rows} <= expected


def test_refused_block_ids_change_nothing():
    engine = Engine(table="blocks", block_size=4)
    canary = engine.install(kvr.Config(mode="raise"), log=lambda level, text: None)
    canary.mark_init_finished()
    steps(engine, canary, 2)
    batch, host = engine.schedule()
    good = list(host.block_ids)
    records = canary.canary_buffer("full", True, False).clone()
    blocks, last = engine.slots // 4, len(good) - 1
    for bad, message in [
            (good[:-1], f"host block_ids must hold the {len(good)} blocks the batch's lengths "
                        f"need, got {len(good) - 1}"),
            (good[:-1] + [blocks],
             f"host block_ids[{last}]={blocks} is outside the pool's blocks [0, {blocks})"),
            (good[:-1] + [-1], f"host block_ids[{last}]=-1 is outside")]:
        host.block_ids = bad
        with pytest.raises(ValueError, match="^kv-canary: " + re.escape(message)):
            canary.begin_step([batch], [host])
        assert canary.outer_step == 2
        assert torch.equal(canary.canary_buffer("full", True, False), records)
    host.block_ids = good
    canary.begin_step([batch], [host])
    canary.pre_forward(0)
    engine.write_kv()
    canary.post_forward(0)
    canary.end_step()
    assert steps(engine, canary, 2) == []


@pytest.mark.parametrize("keywords, message", [
    (dict(block_size=3), "block_size=3 must divide pool_slot_count=256"),
    (dict(block_size=0), "block_size must be in [1, "),
    (dict(block_size="4"), "block_size must be an int, got str"),
    (dict(block_table=[[1]]), "block_table must be a tensor"),
    (dict(req_to_token=torch.zeros(4, 64, dtype=torch.int32)),
     "install needs exactly one of req_to_token and block_table, got both"),
    (dict(block_table=None),
     "install needs exactly one of req_to_token and block_table, got neither"),
])
def test_install_refuses_block_tables(keywords, message):
    engine = Engine(table="blocks", block_size=4)
    with pytest.raises(ValueError, match="^kv-canary: " + re.escape(message)):
        engine.install(kvr.Config(mode="log"), **keywords)


def test_a_flip_in_any_listed_layer_is_caught():
    engine = Engine()
    k_layers = [engine.k] + [torch.zeros_like(engine.k) for _ in range(3)]
    v_layers = [engine.v, torch.zeros_like(engine.v)]
    group = engine.group(k_layer0=None, v_layer0=None, k_layers=k_layers, v_layers=v_layers)
    config = kvr.Config(mode="log", real_data="all", enable_mha_v=True, fingerprint_layers="all")
    canary = engine.install(config, groups=[group], log=lambda level, text: None)
    assert steps(engine, canary, 3) == []
    last = k_layers[3]
    del k_layers, v_layers, group  # the runtime keeps the layers it reads
    slot = engine.slot_of(3, 2)
    kvr.paged_layer_bytes(last)[slot, 5] ^= 0x10  # one byte of the last listed K layer
    rows = steps(engine, canary, 3)
    assert rows and all(row.slot_idx == slot for row in rows)
    assert "verify_real_kv_hash" in rows[0].fail_reasons


def test_layers_refused():
    engine = Engine()
    with pytest.raises(ValueError,
                       match="^kv-canary: group FULL k_layers and k_layer0 are both given"):
        engine.install(kvr.Config(mode="log"), groups=[engine.group(k_layers=[engine.k])])
    with pytest.raises(ValueError,
                       match=r"^kv-canary: k_layers must hold at most 1024 tensors, got 1025"):
        engine.group(k_layers=[engine.k] * 1025)
    with pytest.raises(kvcanary.KvCanaryTypeError, match=r"^kv-canary: v_layers\[1\] must be a "):
        engine.group(v_layers=[engine.v, "layer"])


def test_a_forward_may_pass_its_own_block_table():
    engine = Engine(table="blocks", block_size=4)
    canary = engine.install(kvr.Config(mode="raise", real_data="all"), log=lambda level, text: None)
    for _ in range(4):
        batch, host = engine.schedule()
        batch.block_table = engine.block_table.clone()  # the forward's own copy of the table
        canary.begin_step([batch], [host])
        del batch
        canary.pre_forward(0)
        engine.write_kv()
        canary.post_forward(0)
        canary.end_step()
    assert canary.stats()["violations_total"] == 0


def test_perturbations_fire_and_are_caught():
    engine = Engine(table="blocks", block_size=4)
    perturb = kvr.PerturbConfig(real_kv_used_prob=1.0, target_group="full", warmup_steps=2,
                                seed=7)
    canary = engine.install(kvr.Config(mode="log", real_data="all"), perturb=perturb,
                            log=lambda level, text: None)
    events = []
    canary.on_perturbation(events.append)
    rows = steps(engine, canary, 6)
    assert events and events[0].kind == "real_kv_used" and events[0].step >= 2
    assert events[0].layer == 0 and events[0].byte == 0  # real_kv_used flips a strip's first byte
    assert rows and {row.slot_idx for row in rows} <= {event.slot for event in events}
    assert canary.perturb_next_tokens([5, 6]) == [5, 6]  # next_token_swap is off
