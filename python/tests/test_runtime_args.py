"""kvcanary.runtime refuses every bad argument with a `kv-canary:` message naming it, and a refused
call changes nothing: the runtime's step count stays, and the next step runs clean."""

import numpy as np
import pytest
from runtime_engine import Engine, torch

import kvcanary
from kvcanary import runtime as kvr

TYPE = kvcanary.KvCanaryTypeError


@pytest.mark.parametrize("make, error, message", [
    (lambda: kvr.Config(mode=1), TYPE, "mode must be a str, got int"),
    (lambda: kvr.Config(mode="loud"), ValueError, "mode must be one of none/log/raise, got 'loud'"),
    (lambda: kvr.Config(real_data="some"), ValueError, "real_data must be one of"),
    (lambda: kvr.Config(ring_capacity=0), ValueError, "ring_capacity must be in"),
    (lambda: kvr.Config(ring_capacity=16.0), TYPE, "ring_capacity must be an int, got float"),
    (lambda: kvr.Config(fused_verify=1), TYPE, "fused_verify must be a bool, got int"),
    (lambda: kvr.Config(mode="none", sweep_interval=5), ValueError, "sweep_interval"),
    (lambda: kvr.Config(ringcapacity=5), TYPE,
     "Config got an unexpected keyword argument 'ringcapacity'"),
    (lambda: kvr.Config("log"), TYPE, "Config takes keyword arguments only, got 1 positional"),
    (lambda: kvr.PerturbConfig(req_to_token_prob="x"), TYPE, "req_to_token_prob must be a number"),
    (lambda: kvr.PerturbConfig(req_to_token_prob=2.0), ValueError,
     "req_to_token_prob must be in [0, 1], got 2"),
    (lambda: kvr.PerturbConfig(real_perturb_bytes_prob=1.5), ValueError,
     "real_perturb_bytes_prob must be in [0, 1], got 1.5"),
    (lambda: kvr.PerturbConfig(real_perturb_bytes_require_orphan=1), TYPE,
     "real_perturb_bytes_require_orphan must be a bool, got int"),
    (lambda: kvr.PerturbConfig(target_group="mla"), ValueError,
     "target_group must be 'full' or 'swa', got 'mla'"),
    (lambda: kvr.GroupSpec(kind="mla"), ValueError, "kind must be 'full' or 'swa', got 'mla'"),
    (lambda: kvr.GroupSpec(num_slots="8"), TYPE, "num_slots must be an int, got str"),
    (lambda: kvr.GroupSpec(k_layer0=[1, 2]), TYPE, "k_layer0 must be a tensor"),
    (lambda: kvr.GroupSpec(bytes_per_token=True), TYPE, "bytes_per_token must be an int, got bool"),
    (lambda: kvr.ForwardBatch(batch_size=2**63), ValueError, "batch_size must fit in int64"),
    (lambda: kvr.ForwardBatch(input_ids="ids"), TYPE, "input_ids must be a tensor"),
    (lambda: kvr.ForwardHostInput(prefix_lens=[0, "1"]), TYPE,
     "prefix_lens[1] must be an int, got str"),
    (lambda: kvr.ForwardHostInput(prefix_lens=np.array([0.5])), TYPE,
     "prefix_lens[0] must be an int, got float"),
    (lambda: kvr.ForwardHostInput(extend_seq_lens=3), TYPE,
     "extend_seq_lens must be a list of ints"),
    (lambda: kvr.Capacities(verify_capacity=None), TYPE,
     "verify_capacity must be an int, got None"),
])
def test_argument_classes_refuse(make, error, message):
    with pytest.raises(error, match="^kv-canary: " + _escape(message)):
        make()


def test_a_refused_attribute_keeps_its_value():
    config = kvr.Config(mode="log", ring_capacity=64)
    with pytest.raises(TYPE, match="kv-canary: ring_capacity must be an int"):
        config.ring_capacity = "128"
    assert config.ring_capacity == 64
    host = kvr.ForwardHostInput(prefix_lens=[1, 2])
    with pytest.raises(TYPE):
        host.prefix_lens = [1, None]
    assert host.prefix_lens == [1, 2]
    host.prefix_lens = torch.tensor([3, 4])  # anything with .tolist()
    assert host.prefix_lens == [3, 4]


def _escape(text):
    import re

    return re.escape(text)


@pytest.mark.parametrize("keywords, error, message", [
    (dict(groups="full"), TYPE, "groups must be a list of GroupSpec, got str"),
    (dict(groups=[{"kind": "full"}]), TYPE, "groups[0] must be a GroupSpec, got dict"),
    (dict(groups=[]), ValueError, "install needs at least one buffer group"),
    (dict(pool_slot_count=True), TYPE, "pool_slot_count must be an int, got bool"),
    (dict(chunked_prefill_size="4"), TYPE, "chunked_prefill_size must be an int, got str"),
    (dict(device="tpu"), ValueError, "device must be 'cpu', 'cuda' or 'cuda:<index>', got 'tpu'"),
    (dict(device=3), TYPE, "device must be a str, a torch.device or None, got int"),
    (dict(log="stderr"), TYPE, "log must be a callable(level, message) or None, got str"),
    (dict(req_to_token=[[0]]), TYPE, "req_to_token must be a tensor"),
    (dict(num_inner_forwards=0), ValueError, "num_inner_forwards must be positive, got 0"),
    (dict(capacities={"verify_capacity": 4}), TYPE, "capacities must be a Capacities or None"),
    (dict(perturb=0.5), TYPE, "perturb must be a PerturbConfig, got float"),
    (dict(unknown=1), TYPE, "install got an unexpected keyword argument 'unknown'"),
])
def test_install_refuses(keywords, error, message):
    engine = Engine()
    with pytest.raises(error, match="^kv-canary: " + _escape(message)):
        engine.install(kvr.Config(mode="log"), **keywords)


def test_install_refuses_a_config_of_another_type():
    with pytest.raises(TYPE, match="kv-canary: config must be a kvcanary.runtime.Config, got dict"):
        kvr.install({"mode": "log"})


def test_install_refuses_layers_it_cannot_read_as_pages():
    engine = Engine()
    transposed = torch.zeros(engine.slots, 8, 2, dtype=torch.bfloat16).transpose(1, 2)
    with pytest.raises(ValueError, match=r"^kv-canary: groups\[0\]\.k_layer0 must have dense dims "
                                         r"after the first"):
        engine.install(kvr.Config(mode="log", real_data="all"),
                       groups=[engine.group(k_layer0=transposed)])
    with pytest.raises(ValueError, match=r"^kv-canary: groups\[0\]\.bytes_per_token must be given"):
        engine.install(kvr.Config(mode="log"), groups=[engine.group(page_size=3)])
    flat = torch.zeros(engine.slots * 32, dtype=torch.uint8)
    with pytest.raises(ValueError,
                       match=r"^kv-canary: groups\[0\]\.v_layer0 must have at least 2 dims"):
        engine.install(kvr.Config(mode="log"), groups=[engine.group(v_layer0=flat)])


@pytest.fixture
def running():
    """An engine and its runtime after two clean steps."""
    engine = Engine()
    canary = engine.install(kvr.Config(mode="raise"), log=lambda level, text: None)
    canary.mark_init_finished()
    for _ in range(2):
        engine.step(canary)
    return engine, canary


def refused_calls(engine, canary):
    batch, host = engine.schedule()
    return [
        (lambda: canary.begin_step(batch, [host]), TYPE, "forwards must be a list of ForwardBatch"),
        (lambda: canary.begin_step([batch], [host, host]), ValueError,
         "host must hold one ForwardHostInput per ForwardBatch (1), got 2"),
        (lambda: canary.begin_step([host], [host]), TYPE,
         "forwards[0] must be a ForwardBatch, got "),
        (lambda: canary.begin_step([batch], [batch]), TYPE, "host[0] must be a ForwardHostInput"),
        (lambda: canary.pre_forward("0"), TYPE, "inner must be an int, got str"),
        (lambda: canary.post_forward(2**40), ValueError, "inner must fit in int32"),
        (lambda: canary.on_violation(5), TYPE,
         "callback must be a callable(row, step) or None, got int"),
        (lambda: canary.attach_radix_cache(object()), TYPE,
         "view must have a method root(), got object"),
        (lambda: canary.canary_buffer("mla", True, False), ValueError,
         "kind must be 'full' or 'swa'"),
        (lambda: canary.canary_buffer("full", 1, False), TYPE, "tail must be a bool, got int"),
        (lambda: canary.canary_buffer("swa", True, False), ValueError, "kv-canary: "),
    ]


@pytest.mark.parametrize("index", range(11))
def test_refused_runtime_calls_change_nothing(running, index):
    engine, canary = running
    before = (canary.outer_step, canary.stats())
    records = canary.canary_buffer("full", True, False).clone()
    call, error, message = refused_calls(engine, canary)[index]
    engine.lengths, engine.next_slot = [0] * engine.rows, 1  # the refused step never ran
    engine.req_to_token.zero_()
    with pytest.raises(error, match="^" + ("" if message.startswith("kv-canary") else "kv-canary: ")
                       + _escape(message)):
        call()
    assert (canary.outer_step, canary.stats()) == before
    assert torch.equal(canary.canary_buffer("full", True, False), records)
