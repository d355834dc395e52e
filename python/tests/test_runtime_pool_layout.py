"""kvcanary.runtime.GroupSpec.layout (docs/integration.md, "Pool kinds"): an "mla" group gives its
latent layer as k_layer0 and no V layer, and gets the K canary half alone, whose fingerprint
catches a flipped latent byte; an "nsa" group adds the indexer's key buffer (indexer_layers),
a flipped byte of which is caught too; on the CPU, on CUDA and replayed from a CUDA graph."""

import re

import pytest
from runtime_graph import RUNS, Run, steps

from kvcanary import runtime as kvr
from runtime_engine import Engine, torch

CONFIG = dict(mode="log", real_data="partial", enable_mha_v=True)  # V would run if present


def test_layout_defaults_to_mha_and_takes_any_case():
    assert kvr.GroupSpec().layout == "mha"
    assert kvr.GroupSpec(layout="MLA").layout == "mla"
    spec = kvr.GroupSpec(layout="nsa", indexer_bytes_per_token=64)
    assert (spec.layout, spec.indexer_layers, spec.indexer_bytes_per_token) == ("nsa", [], 64)
    with pytest.raises(ValueError, match="^kv-canary: layout must be 'mha', 'mla' or 'nsa', "
                                         "got 'gqa'$"):
        kvr.GroupSpec(layout="gqa")


def test_an_mla_group_with_a_v_layer_is_refused():
    engine = Engine()
    message = ("kv-canary: group FULL v_layer0 and v_layers must be empty with layout mla (its "
               "latent layers are k_layer0 / k_layers), got 1 V layer(s)")
    with pytest.raises(ValueError, match="^" + re.escape(message) + "$"):
        engine.install(kvr.Config(**CONFIG), groups=[engine.group(layout="mla")])


def _indexer(engine):
    generator = torch.Generator().manual_seed(7)
    keys = torch.randint(0, 256, (engine.slots, 32), dtype=torch.uint8, generator=generator)
    return keys.to(engine.device)


@pytest.mark.parametrize("device, graph", RUNS)
@pytest.mark.parametrize("layout", ["mla", "nsa"])
def test_a_flipped_latent_or_indexer_byte_is_caught_by_tail_k(layout, device, graph):
    with Run(device, graph) as run:
        indexer = _indexer(run.engine)
        extra = dict(indexer_layers=[indexer]) if layout == "nsa" else {}
        group = run.engine.group(layout=layout, v_layer0=None, **extra)
        canary = run.install(kvr.Config(**CONFIG), groups=[group], log=lambda level, text: None)
        assert canary.record_bytes == 2 * run.engine.slots * 32  # HEAD_K and TAIL_K
        with pytest.raises(ValueError, match="has no V half"):
            canary.canary_buffer("full", tail=True, v_half=True)
        assert steps(run, canary, 4) == []
        slot = run.engine.slot_of(1, 2)
        if layout == "nsa":
            indexer[slot, 3] ^= 0x10
        else:
            kvr.paged_layer_bytes(run.engine.k)[slot, 3] ^= 0x10
        rows = steps(run, canary, 3)
    assert rows and all(row.slot_idx == slot for row in rows)
    assert all(row.launch_tag == "TAIL_K_FULL" for row in rows)
    assert "verify_real_kv_hash" in rows[0].fail_reasons
