"""A toy inference engine on CPU torch tensors with kvcanary's host runtime installed: the four
calls around every forward, violations read through a listener, then one canary record corrupted
on purpose and caught. Exit status 0 when the corruption was reported and nothing else was.

    PYTHONPATH=<build>/python python3 examples/python/runtime_loop.py

docs/python_runtime.md walks through it. KVCANARY_MODE etc. are read from the environment; unset,
the example runs in mode log (mode none would install nothing).
"""

import os
import sys

import torch

import kvcanary
from kvcanary import runtime as kvr

SLOTS = 256  # KV pool slots; slot 0 is the padding slot
ROWS = 4  # req_to_token rows; row 0 is the padding row
CONTEXT = 64  # req_to_token columns: the longest request
HEADS, HEAD_DIM = 2, 8  # one KV layer: [SLOTS, HEADS, HEAD_DIM] bfloat16, 32 bytes a token
MAX_TOKENS = 64  # tokens of one forward
PROMPT_TOKENS = 8


class ToyEngine:
    """One KV layer, the req_to_token table, and a forward's batch tensors, all CPU torch."""

    def __init__(self):
        self.k = torch.zeros(SLOTS, HEADS, HEAD_DIM, dtype=torch.bfloat16)
        self.v = torch.zeros(SLOTS, HEADS, HEAD_DIM, dtype=torch.bfloat16)
        self.req_to_token = torch.zeros(ROWS, CONTEXT, dtype=torch.int32)
        self.written = [0] * ROWS  # tokens in the KV cache, per row
        self.next_slot = 1

    @staticmethod
    def token(row, position):
        return 1000 * row + position

    def install(self, config):
        return kvr.install(
            config,
            req_to_token=self.req_to_token,
            groups=[kvr.GroupSpec(kind="full", num_slots=SLOTS, k_layer0=self.k, v_layer0=self.v)],
            pool_slot_count=SLOTS,
            max_prefill_tokens=MAX_TOKENS)

    def schedule(self):
        """Every request (rows 1..3) prefills its prompt, then decodes a token per step."""
        rows, prefix, extend, ids, positions, slots = [], [], [], [], [], []
        for row in range(1, ROWS):
            begin = self.written[row]
            end = PROMPT_TOKENS if begin == 0 else begin + 1
            rows.append(row)
            prefix.append(begin)
            extend.append(end - begin)
            for position in range(begin, end):
                self.req_to_token[row, position] = self.next_slot
                ids.append(self.token(row, position))
                positions.append(position)
                slots.append(self.next_slot)
                self.next_slot += 1
            self.written[row] = end
        column = lambda values: torch.tensor(values, dtype=torch.int64)
        batch = kvr.ForwardBatch(
            batch_size=len(rows), num_tokens=len(ids), req_pool_indices=column(rows),
            prefix_lens=column(prefix), extend_seq_lens=column(extend), input_ids=column(ids),
            positions=column(positions), out_cache_loc=column(slots))
        host = kvr.ForwardHostInput(req_pool_indices=rows, prefix_lens=prefix,
                                    extend_seq_lens=extend)
        return batch, host

    def forward(self, batch):
        """The model: writes the KV of the forward's new tokens."""
        for token, slot in zip(batch.input_ids.tolist(), batch.out_cache_loc.tolist()):
            self.k[slot] = float(token % 251)
            self.v[slot] = float(token % 241) + 0.5


def main():
    print(f"kvcanary {kvcanary.__version__} Python runtime loop example")
    engine = ToyEngine()
    os.environ.setdefault("KVCANARY_MODE", "log")
    config = kvr.Config.from_env()
    canary = engine.install(config)
    if canary is None:
        print(f"KVCANARY_MODE={config.mode}: kvcanary is off, the engine runs unchecked")
        return 0
    violations = []
    canary.on_violation(lambda row, step: violations.append(row))
    canary.mark_init_finished()  # after CUDA-graph capture and warm-up

    corrupted_slots = []
    for step in range(8):
        batch, host = engine.schedule()
        try:
            canary.begin_step([batch], [host])  # phase 1, outside graphs
            canary.pre_forward(0)  # phase 2: plan, HEAD verify + write (capturable)
            engine.forward(batch)  # the model writes the new tokens' KV
            canary.post_forward(0)  # phase 3: TAIL verify + write (capturable)
            canary.end_step()  # phase 4: reports last step's violations
        except kvcanary.CorruptionError as error:  # mode raise: the listener saw the rows too
            print(f"step {step}: CorruptionError with {len(error.rows)} row(s)")
            break
        if step == 3:
            # Flip the token of request 1's position 2 in its TAIL K record, as a stray write would.
            corrupted_slots = [int(engine.req_to_token[1, p]) for p in (2, 3)]
            records = canary.canary_buffer("full", True, False).view(torch.int64)
            records[corrupted_slots[0], kvcanary.CANARY_FIELD_TOKEN] ^= 1
            print(f"step {step}: corrupted the record of slot {corrupted_slots[0]}")

    caught = [row for row in violations if row.slot_idx in corrupted_slots]
    for row in violations:
        print(f"violation: {row.first_line}")
    stats = canary.stats()
    print(f"stats: violations_total={stats['violations_total']} "
          f"rows_reported={stats['rows_reported']} outer_step={canary.outer_step}")
    passed = bool(caught) and len(caught) == len(violations)
    print(f"{'PASS' if passed else 'FAIL'}: {len(violations)} violation(s), {len(caught)} on the "
          f"corrupted record or the one after it")
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
