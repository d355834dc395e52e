"""A toy engine loop through kvcanary's Python launchers, on CPU tensors (torch).

One request lives in row 1 of a req_to_token table; every forward plans, verifies the request's
prefix records and writes the records of its new tokens. After a prefill and two decode steps one
record is corrupted (its token overwritten, as a stale slot reused by another request would
leave it) and the next forward's verify reports it: the record after it no longer chains (the token
check itself is off, the runtime's default). Run it as is:

    python3 examples/python/engine_loop.py

with the package importable (pip-installed, or PYTHONPATH=<build>/python).
"""

import sys

import torch

import kvcanary

NUM_SLOTS, MAX_LEN, RING_ROWS = 64, 32, 16
TAG = kvcanary.CanaryLaunchTag.TAIL_K_FULL


def i64(values):
    return torch.tensor(values, dtype=torch.int64)


class Canary:
    """One canary buffer (a 32-byte record per KV slot), its violation ring and counters."""

    def __init__(self):
        self.records = torch.zeros((NUM_SLOTS, kvcanary.CANARY_SLOT_BYTES), dtype=torch.uint8)
        self.ring = torch.zeros((RING_ROWS, kvcanary.VIOLATION_FIELDS), dtype=torch.int64)
        self.write_index = torch.zeros(1, dtype=torch.int32)
        self.counters = [torch.zeros(1, dtype=torch.int64) for _ in range(2)]
        self.chain_assert = torch.zeros(1, dtype=torch.int32)

    def context(self):
        return kvcanary.VerifyOrWriteContext(
            canary_buf=self.records, kernel_kind=int(TAG), violation_ring=self.ring,
            violation_write_index=self.write_index, slot_run_counter=self.counters[0],
            kernel_run_counter=self.counters[1], real_kv_sources=(),
            real_kv_hash_mode=int(kvcanary.RealKvHashMode.NONE),
            enable_chain_position_assert=self.chain_assert)

    def violations(self):
        count = min(int(self.write_index[0]), RING_ROWS)
        return self.ring[:count].tolist()


def forward(canary, req_to_token, tokens_so_far, new_tokens):
    """The canary's part of one forward of request row 1: plan, verify the prefix, write."""
    verify_plan = kvcanary.VerifyPlan.allocate(MAX_LEN)
    write_plan = kvcanary.WritePlan.allocate(1)
    prefix = len(tokens_so_far)
    kvcanary.launch_canary_plan_kernels(
        verify_plan_out=verify_plan, write_plan_out=write_plan, req_pool_indices=i64([1]),
        prefix_lens=i64([prefix]), extend_seq_lens=i64([len(new_tokens)]),
        req_to_token=req_to_token, swa_window_size=0, full_to_swa_index_mapping=None,
        verify_capacity=MAX_LEN, req_to_verify_expected_tokens=None,
        req_to_verify_expected_tokens_valid_lens=None, kv_token_id_vs_position_offset=0,
        verify_offsets_scratch=None)
    kvcanary.launch_canary_verify_kernel(context=canary.context(), plan=verify_plan,
                                         check_verify_expected_token=False)
    positions = list(range(prefix, prefix + len(new_tokens)))
    kvcanary.launch_canary_write_kernel(
        context=canary.context(), plan=write_plan, input_ids=i64(new_tokens),
        positions=i64(positions), out_cache_loc=req_to_token[1, prefix:prefix + len(new_tokens)]
        .to(torch.int64), enable_write_input_assert=False, expected_input_tokens=None,
        expected_input_positions=None)
    tokens_so_far.extend(new_tokens)


def main():
    canary = Canary()
    req_to_token = torch.zeros((2, MAX_LEN), dtype=torch.int32)
    req_to_token[1] = torch.arange(1, MAX_LEN + 1, dtype=torch.int32)  # slot 0 stays padding
    tokens = []
    forward(canary, req_to_token, tokens, [101, 102, 103, 104])  # prefill
    forward(canary, req_to_token, tokens, [105])                 # decode
    forward(canary, req_to_token, tokens, [106])
    if canary.violations():
        print("FAIL: violations on a clean run:", canary.violations())
        return 1

    # Corrupt the record of position 2: its stored token no longer matches the chain.
    slot = int(req_to_token[1, 2])
    canary.records.view(torch.int64)[slot, kvcanary.CANARY_FIELD_TOKEN] = 999
    forward(canary, req_to_token, tokens, [107])
    rows = canary.violations()
    for row in rows:  # the reporter's message; its first line names slot, position and reason
        message = kvcanary.format_violation(row, total_violations=len(rows), ring_overflow=False,
                                            step_when_pumped=4)
        print(message.split("\n")[0])
    if not rows or any(row[1] not in (slot, slot + 1) for row in rows):
        print("FAIL: the corrupted record was not reported as expected")
        return 1
    print(f"PASS: {len(rows)} violation(s), all on slot {slot} or the record after it")
    return 0


if __name__ == "__main__":
    sys.exit(main())
