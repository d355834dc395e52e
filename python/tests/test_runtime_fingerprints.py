"""kvcanary.runtime with Config.fingerprint_layers over an engine of four layers (k_layers and
v_layers, every one written by the model, docs/fingerprints.md): "all" reports a byte flipped in
the deepest layer, "layer0" (the default) misses it and still reports a flip in layer 0; on the
CPU, on CUDA and with decode steps replayed from a CUDA graph (runtime_graph.py)."""

import pytest
from runtime_graph import RUNS, Run, steps

from kvcanary import runtime as kvr

LAYERS = 4


@pytest.mark.parametrize("device, graph", RUNS)
@pytest.mark.parametrize("fingerprint_layers, flipped_layer, caught", [
    ("all", LAYERS - 1, True), ("layer0", LAYERS - 1, False), ("layer0", 0, True)])
def test_a_flip_is_caught_in_the_fingerprinted_layers_only(fingerprint_layers, flipped_layer,
                                                           caught, device, graph):
    with Run(device, graph, layers=LAYERS) as run:
        config = kvr.Config(mode="log", real_data="all", enable_mha_v=True,
                            fingerprint_layers=fingerprint_layers)
        canary = run.install(config, log=lambda level, text: None)
        assert steps(run, canary, 4) == []
        slot = run.engine.slot_of(3, 2)
        kvr.paged_layer_bytes(run.engine.k_layers[flipped_layer])[slot, 5] ^= 0x10
        rows = steps(run, canary, 3)
        assert run.replays == (4 if run.capture else 0)  # steps 4 to 7
    if not caught:
        assert rows == []
        return
    assert rows and all(row.slot_idx == slot for row in rows)
    assert all(row.launch_tag == "TAIL_K_FULL" for row in rows)
    assert "verify_real_kv_hash" in rows[0].fail_reasons


def test_every_layer_is_written_and_listed():
    with Run("cpu", False, layers=LAYERS) as run:
        group = run.engine.group()
        assert len(group.k_layers) == len(group.v_layers) == LAYERS
        canary = run.install(kvr.Config(mode="log", real_data="all", fingerprint_layers="all"))
        steps(run, canary, 2)
        slot = run.engine.slot_of(1, 0)
        tokens = {float(layer[slot, 0, 0]) for layer in run.engine.k_layers}
        assert len(tokens) == LAYERS and 0.0 not in tokens  # each layer its own bytes
