"""examples/torch_engine.py: a PyTorch engine with a paged KV cache, checked by kvcanary.runtime.

The end-to-end cases run the example as a user does (CPU, default workload) and check its exit
code and report; the unit cases check the pieces an engine would copy: the block pool's sharing
and eviction, and that attention through a block table reads what the slot mapping wrote.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import kvcanary

torch = pytest.importorskip("torch")

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
sys.path.insert(0, str(EXAMPLES))

from torch_engine.block_pool import BlockPool, block_keys  # noqa: E402
from torch_engine.model import Forward, ModelConfig, TinyDecoder  # noqa: E402

FAULTS = ("block_swap", "freed_reuse", "kv_flip", "stale_slot_mapping")


def run_example(*args: str, device: str = "cpu") -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(EXAMPLES / "torch_engine.py"), "--device", device,
                           *args], capture_output=True, text=True, timeout=600, env=os.environ)


def table_rows(stdout: str) -> dict:
    """fault -> its cells, from the report's fault table."""
    rows = {}
    for line in stdout.splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if cells and cells[0] in FAULTS:
            rows[cells[0]] = cells
    return rows


HAVE_CUDA = torch.cuda.is_available() and kvcanary._kvcanary.HAVE_CUDA
ON_CUDA = pytest.mark.skipif(not HAVE_CUDA, reason="no CUDA device or backend")


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=ON_CUDA)])
def test_every_fault_is_detected_and_every_violation_explained(device):
    proc = run_example("--faults", "all", device=device)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = table_rows(proc.stdout)
    assert sorted(rows) == sorted(FAULTS)
    for fault, (_, injected, detected, latency, slot, reason, explained, _) in rows.items():
        assert int(detected) - int(injected) == int(latency) >= 0, fault
        assert int(slot) > 0 and int(explained) >= 1, fault
        assert re.fullmatch(r"(HEAD|TAIL)_[KV]_FULL [a-z_+]+", reason), (fault, reason)
    assert rows["kv_flip"][5].endswith("verify_real_kv_hash")
    assert "false positives: 0" in proc.stdout
    assert "PASS: 4 of 4 injected faults detected, 0 false positives" in proc.stdout


def test_no_faults_no_violations():
    proc = run_example("--faults", "none")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "PASS: no faults, 0 violations reported" in proc.stdout
    assert table_rows(proc.stdout) == {}


def test_without_fingerprints_the_flipped_byte_is_missed():
    proc = run_example("--faults", "kv_flip", "--real-data", "none")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert table_rows(proc.stdout)["kv_flip"][2] == "–"
    assert "missed: kv_flip" in proc.stdout


def test_negative_control_faults_change_outputs():
    proc = run_example("--canary", "off")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    differing = int(re.search(r"generated tokens that differ: (\d+)", proc.stdout).group(1))
    assert differing > 0
    clean = run_example("--canary", "off", "--faults", "none")
    assert clean.returncode == 0 and "generated tokens that differ: 0 " in clean.stdout


def test_bad_fault_list_is_refused():
    proc = run_example("--faults", "kv_flip,bogus")
    assert proc.returncode == 2
    assert "got 'kv_flip,bogus'" in proc.stderr


def test_block_pool_shares_prefixes_and_evicts_least_recently_used():
    pool = BlockPool(num_blocks=4, block_size=2)
    keys = block_keys([5, 6, 7, 8], 2, 2)
    first, second = pool.allocate(), pool.allocate()
    assert 0 not in (first, second)  # block 0 is padding
    pool.register(first, keys[0], step=0)
    pool.register(second, keys[1], step=0)
    assert pool.lookup(keys[0]) == first
    pool.acquire_cached(first)           # a second request shares the prefix block
    assert pool.ref_count[first] == 2
    for block in (first, first, second):
        pool.release(block)
    assert pool.available() == 3         # 1 free + 2 cached, unreferenced
    third = pool.allocate()              # the free block first
    assert third not in (first, second)
    assert pool.allocate() == first      # then the least recently released cached block
    assert pool.lookup(keys[0]) is None and pool.lookup(keys[1]) == second


def _logits(model, kv, table, tokens, chunks):
    """Prefills ``tokens`` in ``chunks`` through block-table row 1; the last token's logits."""
    out, start = None, 0
    for size in chunks:
        ids = torch.tensor(tokens[start:start + size])
        positions = torch.arange(start, start + size)
        row = table[1].to(torch.int64)
        slots = row[positions // 4] * 4 + positions % 4
        out = model.forward(Forward(ids, positions, slots, [(1, start, size)]), kv, table,
                            [size - 1])
        start += size
    return out


def test_paged_attention_reads_what_the_slot_mapping_wrote():
    model = TinyDecoder(ModelConfig(), seed=3, device=torch.device("cpu"))
    tokens = [(7 * i + 3) % 256 for i in range(13)]
    tables = []
    for blocks in ([1, 2, 3, 4], [9, 5, 7, 6]):  # contiguous, and scattered over the pool
        table = torch.zeros((2, 4), dtype=torch.int32)
        table[1] = torch.tensor(blocks, dtype=torch.int32)
        tables.append(table)
    whole = _logits(model, model.new_kv_cache(10, 4, torch.device("cpu")), tables[0], tokens, [13])
    scattered = _logits(model, model.new_kv_cache(10, 4, torch.device("cpu")), tables[1], tokens,
                        [5, 7, 1])
    torch.testing.assert_close(whole, scattered, rtol=1e-4, atol=1e-4)
    kv = model.new_kv_cache(10, 4, torch.device("cpu"))
    _logits(model, kv, tables[1], tokens, [12])
    swapped = tables[1].clone()
    swapped[1, [0, 3]] = swapped[1, [3, 0]]

    def decode_last(table):  # position 12 lands in entry 3: block 6, slot 24
        return model.forward(Forward(torch.tensor(tokens[12:]), torch.tensor([12]),
                                     torch.tensor([6 * 4]), [(1, 12, 1)]), kv, table, [0])

    torch.testing.assert_close(decode_last(tables[1]), whole, rtol=1e-4, atol=1e-4)
    assert not torch.allclose(decode_last(swapped), whole, rtol=1e-3, atol=1e-3)
