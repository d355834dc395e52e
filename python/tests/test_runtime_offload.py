"""kvcanary.runtime's host-offload calls: backup_records copies records to the host mirror (and
with verify_backup re-hashes the host copy of layer 0), restore_records copies them back, so slots
reloaded from the host verify."""

import pytest
from runtime_engine import Engine, torch

import kvcanary
from kvcanary import runtime as kvr

HOST_SLOTS = 32


@pytest.fixture
def offloaded():
    """A runtime with a host mirror after 3 steps, request 1's six prompt slots backed up to host
    slots 0..5 with the host copy of their KV."""
    engine = Engine()
    config = kvr.Config(mode="raise", real_data="all", verify_backup=True, enable_mha_v=True)
    canary = engine.install(config, groups=[engine.group(host_slots=HOST_SLOTS)],
                            log=lambda level, text: None)
    for _ in range(3):
        engine.step(canary)
    device = [engine.slot_of(1, p) for p in range(6)]
    host = list(range(6))
    host_k = torch.zeros((HOST_SLOTS,) + engine.k.shape[1:], dtype=engine.k.dtype)
    host_v = torch.zeros_like(host_k)
    host_k[:6], host_v[:6] = engine.k[device], engine.v[device]
    canary.backup_records("full", host, device, host_k=host_k, host_v=host_v)
    return engine, canary, host, device, host_k, host_v


def test_a_reloaded_slot_verifies(offloaded):
    engine, canary, host, device, _, _ = offloaded
    tail_k = canary.canary_buffer("full", True, False)
    saved = tail_k[device].clone()
    tail_k[device] = 0  # the device slots were evicted and their records lost
    canary.restore_records("full", host, device)
    assert torch.equal(tail_k[device], saved)
    for _ in range(3):
        engine.step(canary)  # raises on any violation
    assert canary.stats()["violations_total"] == 0


def test_a_corrupted_host_copy_raises(offloaded):
    _, canary, host, device, host_k, host_v = offloaded
    host_k[2, 0, 0] += 1.0
    with pytest.raises(kvcanary.CorruptionError,
                       match="kv-canary: CANARY_VERIFY_BACKUP: 1 hash mismatch"):
        canary.backup_records("full", host, device, host_k=host_k, host_v=host_v)


def test_refused_offload_calls(offloaded):
    _, canary, host, device, host_k, host_v = offloaded
    with pytest.raises(ValueError, match="^kv-canary: HiCache backup needs equal index counts"):
        canary.backup_records("full", host[:-1], device, host_k=host_k, host_v=host_v)
    with pytest.raises(ValueError, match="^kv-canary: verify_backup needs host_layer0.k"):
        canary.backup_records("full", host, device)
    with pytest.raises(kvcanary.KvCanaryTypeError, match=r"^kv-canary: host_indices\[0\] must be"):
        canary.restore_records("full", ["0"], device[:1])
    with pytest.raises(ValueError, match="^kv-canary: HiCache restore index pair"):
        canary.restore_records("full", [HOST_SLOTS], device[:1])
