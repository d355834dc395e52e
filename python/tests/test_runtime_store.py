"""kvcanary.runtime's L3 calls: offload_to_store writes a page's host-mirror records as one record
blob file of a FilePageStore, load_from_store puts them back. A corrupted or stale file is reported
as corruption (status "corrupt" in mode log, CorruptionError in mode raise), never as a miss, and a
refused call changes nothing."""

import os

import pytest
from runtime_engine import Engine, torch

import kvcanary
from kvcanary import runtime as kvr

HOST_SLOTS = 32
HOST = list(range(6))  # the host slots every page goes through
SCRATCH = list(range(200, 206))  # device slots no request uses: the mirror is read through them
BLOB_BYTES = 32 + 4 * len(HOST) * 32  # header, then 4 buffers of one record per slot


class Offload:
    """A runtime with a host mirror and a FilePageStore after 3 steps; page A is request 1's six
    prompt slots, page B request 2's."""

    def __init__(self, directory, mode):
        self.engine = Engine()
        self.lines = []
        config = kvr.Config(mode=mode, real_data="all", verify_backup=True, enable_mha_v=True)
        self.canary = self.engine.install(config, groups=[self.engine.group(host_slots=HOST_SLOTS)],
                                          log=lambda level, text: self.lines.append(text))
        for _ in range(3):
            self.engine.step(self.canary)
        self.page_a = [self.engine.slot_of(1, p) for p in range(6)]
        self.page_b = [self.engine.slot_of(2, p) for p in range(6)]
        self.host_k = torch.zeros((HOST_SLOTS,) + self.engine.k.shape[1:],
                                  dtype=self.engine.k.dtype)
        self.host_v = torch.zeros_like(self.host_k)
        self.store = kvr.FilePageStore(directory)

    def host_kv(self, device):
        """The page's KV into host slots HOST (a load from L3 brings it back before the records)."""
        self.host_k[:6], self.host_v[:6] = self.engine.k[device], self.engine.v[device]

    def backup(self, device):
        """The page's KV and records into host slots HOST, as an engine's host tier keeps them."""
        self.host_kv(device)
        self.canary.backup_records("full", HOST, device, host_k=self.host_k, host_v=self.host_v)

    def records(self, device):
        """The four records (head/tail, K/V) of each device slot."""
        return torch.cat([self.canary.canary_buffer("full", tail, v)[device].clone()
                          for tail in (False, True) for v in (False, True)])

    def mirror(self):
        """The records host slots HOST hold, read through a restore into the scratch slots."""
        self.canary.restore_records("full", HOST, SCRATCH)
        return self.records(SCRATCH)

    def load(self, key="p0"):
        return self.canary.load_from_store("full", HOST, self.store, key, host_k=self.host_k,
                                           host_v=self.host_v)


@pytest.fixture
def offload(tmp_path):
    return Offload(str(tmp_path), "log")


def test_a_page_round_trips_through_the_file_store(offload):
    offload.backup(offload.page_a)
    offload.canary.offload_to_store("full", HOST, offload.store, "p0")
    assert os.path.getsize(offload.store.path_of("p0")) == BLOB_BYTES
    offload.backup(offload.page_b)  # the host slots now hold another page
    assert not torch.equal(offload.mirror(), offload.records(offload.page_a))
    offload.host_kv(offload.page_a)
    result = offload.load()
    assert (result.status, result.message) == ("loaded", "")
    assert torch.equal(offload.mirror(), offload.records(offload.page_a))
    assert offload.load("never-stored").status == "miss"
    assert offload.canary.stats()["l3_corrupt_loads"] == 0


def corrupt_file(offload):
    """Page A stored as "p0", page B in the host slots, one byte of the file flipped."""
    offload.backup(offload.page_a)
    offload.canary.offload_to_store("full", HOST, offload.store, "p0")
    offload.backup(offload.page_b)
    with open(offload.store.path_of("p0"), "r+b") as blob:
        blob.seek(100)
        byte = blob.read(1)[0]
        blob.seek(100)
        blob.write(bytes([byte ^ 0x01]))


CHECKSUM = ("kv-canary: CANARY_L3_LOAD: stored page 'p0' is corrupt: checksum mismatch (the blob "
            "changed after it was stored)")


def test_a_corrupted_file_is_reported_never_a_miss(offload):
    corrupt_file(offload)
    before = offload.mirror()
    result = offload.load()
    assert (result.status, result.message) == ("corrupt", CHECKSUM)
    assert any("CANARY_L3_LOAD CORRUPT [FULL]: key=p0: checksum mismatch" in line
               for line in offload.lines)
    assert offload.canary.stats()["l3_corrupt_loads"] == 1
    assert "kvcanary_l3_corrupt_loads_total 1\n" in offload.canary.metrics()
    assert torch.equal(offload.mirror(), before)
    offload.engine.step(offload.canary)  # mode log keeps serving


def test_a_corrupted_file_raises_in_mode_raise(tmp_path):
    offload = Offload(str(tmp_path), "raise")
    corrupt_file(offload)
    before = offload.mirror()
    with pytest.raises(kvcanary.CorruptionError, match="^" + CHECKSUM.replace("(", r"\(")
                       .replace(")", r"\)") + "$"):
        offload.load()
    assert offload.canary.stats()["l3_corrupt_loads"] == 1
    assert torch.equal(offload.mirror(), before)


def test_a_stale_page_is_reported(offload):
    offload.backup(offload.page_a)
    offload.canary.offload_to_store("full", HOST, offload.store, "p0")
    with open(offload.store.path_of("p0"), "rb") as blob:
        stale = blob.read()
    offload.backup(offload.page_b)  # a newer version of the page, stored under the same key
    offload.canary.offload_to_store("full", HOST, offload.store, "p0")
    with open(offload.store.path_of("p0"), "wb") as blob:
        blob.write(stale)  # the store answers with the older file: intact, under its key
    before = offload.mirror()
    result = offload.load()  # the host KV is page B's
    assert result.status == "corrupt"
    assert result.message.startswith("kv-canary: CANARY_VERIFY_BACKUP: ")
    assert "hash mismatch(es) across 6 backed-up slots" in result.message
    assert offload.canary.stats()["l3_corrupt_loads"] == 1
    assert torch.equal(offload.mirror(), before)


def test_bad_arguments_are_refused_and_change_nothing(offload, tmp_path):
    offload.backup(offload.page_a)
    before, stats = offload.mirror(), offload.canary.stats()
    canary, store = offload.canary, offload.store
    refused = [
        (lambda: canary.offload_to_store("mla", HOST, store, "p0"), ValueError,
         "^kv-canary: kind must be 'full' or 'swa', got 'mla'$"),
        (lambda: canary.offload_to_store("full", [HOST_SLOTS], store, "p0"), ValueError,
         r"^kv-canary: offload to store host index must be in \[0, 32\), got 32$"),
        (lambda: canary.offload_to_store("full", [], store, "p0"), ValueError,
         "^kv-canary: offload to store host_indices must name at least one slot, got none$"),
        (lambda: canary.offload_to_store("full", HOST, str(tmp_path), "p0"),
         kvcanary.KvCanaryTypeError, "^kv-canary: store must be a kvcanary.runtime.FilePageStore, "
         "got str$"),
        (lambda: canary.offload_to_store("full", HOST, store, 7), kvcanary.KvCanaryTypeError,
         "^kv-canary: key must be a str, got int$"),
        (lambda: canary.offload_to_store("full", HOST, store, "../p0"), ValueError,
         "^kv-canary: page store key must be 1-128 characters"),
        (lambda: canary.load_from_store("full", HOST, store, "p0"), ValueError,
         "^kv-canary: verify_backup needs host_layer0.k"),
        (lambda: canary.load_from_store("full", ["0"], store, "p0"), kvcanary.KvCanaryTypeError,
         r"^kv-canary: host_indices\[0\] must be"),
        (lambda: store.path_of("a/b"), ValueError, "^kv-canary: page store key must be"),
        (lambda: kvr.FilePageStore(42), kvcanary.KvCanaryTypeError,
         "^kv-canary: directory must be a str or os.PathLike, got int$"),
        (lambda: kvr.FilePageStore(str(tmp_path / "missing")), ValueError,
         "^kv-canary: page store directory must exist, got '"),
    ]
    for call, error, match in refused:
        with pytest.raises(error, match=match):
            call()
    assert os.listdir(tmp_path) == []
    assert torch.equal(offload.mirror(), before)
    assert offload.canary.stats() == stats
    assert kvr.FilePageStore(tmp_path).directory == str(tmp_path)  # os.PathLike is a directory
