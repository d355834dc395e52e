"""A multi-step engine scenario through the Python launchers: two requests prefill, decode with a
padding row, the expected-token pool is kept by scatter, then one KV strip and one canary record
are corrupted and the next step's verify reports exactly the expected rows.

The expected hashes come from an independent pure-Python splitmix64, not from the
library."""

import numpy as np
from conftest import State, make_plans

import kvcanary
from kvcanary import RealKvHashMode, RealKvSource

TAG = int(kvcanary.CanaryLaunchTag.TAIL_K_FULL)
MASK = (1 << 64) - 1


def sm64(x):
    x &= MASK
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & MASK
    return x ^ (x >> 31)


def mix3(a, b, c):
    return sm64(sm64(sm64(a) ^ (b & MASK)) ^ (c & MASK))


def signed(x):
    return x - (1 << 64) if x >= 1 << 63 else x


HEAD = sm64(0xC0FFEE1234567890)


class Engine:
    """Row 1 = request A in odd slots, row 2 = request B in even slots (slot 0 stays padding)."""

    def __init__(self, xp):
        self.xp = xp
        self.state = State(xp, 32, ring_capacity=8)
        table = np.zeros((4, 16), np.int32)
        table[1] = 1 + 2 * np.arange(16)
        table[2] = 2 + 2 * np.arange(16)
        self.table = table
        self.req_to_token = xp.array(table, "int32")
        self.pool = xp.zeros((4, 16), "int32")
        rng = np.random.default_rng(7)
        self.kv = xp.array(rng.integers(1, 256, size=(32, 16)), "uint8")
        self.sources = (RealKvSource(self.kv, 1, 16, 16),)
        self.verify_plan, self.write_plan = make_plans(xp, 32, 4)
        self.scratch = xp.zeros(8)
        self.tokens = {1: [], 2: []}  # the source of truth per request row
        self.launches = 0

    def context(self):
        return self.state.context(TAG, sources=self.sources, mode=RealKvHashMode.PARTIAL)

    def step(self, rows, new_tokens):
        """One forward: rows = request rows (0 = padding), new_tokens[i] = tokens row i writes."""
        xp = self.xp
        prefix = [len(self.tokens.get(rp, [])) if rp else 0 for rp in rows]
        extend = [len(t) for t in new_tokens]
        # The expected-token pool holds every committed token (scatter of the snapshot).
        live = [rp for rp in rows if rp]
        flat = [t for rp in live for t in self.tokens[rp]]
        offsets = np.concatenate([[0], np.cumsum([len(self.tokens[rp]) for rp in live])])
        kvcanary.launch_scatter_req_token_ids_kernel(
            flat_in=xp.array(flat), offsets=xp.array(offsets), req_pool_indices=xp.array(live),
            pool_out=self.pool)
        self.verify(rows, prefix, extend)
        ids, positions, slots = [], [], []
        for rp, p, tokens in zip(rows, prefix, new_tokens):
            for i, token in enumerate(tokens):
                ids.append(token)
                positions.append(p + i if rp else 0)
                slots.append(int(self.table[rp, p + i]) if rp else 0)
        kvcanary.launch_canary_write_kernel(
            context=self.context(), plan=self.write_plan, input_ids=xp.array(ids),
            positions=xp.array(positions), out_cache_loc=xp.array(slots),
            enable_write_input_assert=False, expected_input_tokens=None,
            expected_input_positions=None)
        self.launches += 2
        for rp, tokens in zip(rows, new_tokens):
            if rp:
                self.tokens[rp].extend(tokens)
        return sum(prefix[i] for i, rp in enumerate(rows) if rp)

    def verify(self, rows, prefix, extend):
        """Plan and HEAD-style verify of one forward (the fused test overrides this)."""
        xp = self.xp
        kvcanary.launch_canary_plan_kernels(
            verify_plan_out=self.verify_plan, write_plan_out=self.write_plan,
            req_pool_indices=xp.array(rows), prefix_lens=xp.array(prefix),
            extend_seq_lens=xp.array(extend), req_to_token=self.req_to_token,
            swa_window_size=0, full_to_swa_index_mapping=None, verify_capacity=32,
            req_to_verify_expected_tokens=self.pool,
            req_to_verify_expected_tokens_valid_lens=xp.array(prefix),
            kv_token_id_vs_position_offset=0, verify_offsets_scratch=self.scratch)
        kvcanary.launch_canary_verify_kernel(context=self.context(), plan=self.verify_plan,
                                             check_verify_expected_token=True)

    def expected_prev_hashes(self, rp):
        """The slot-hash chain over the request's tokens: what each record stores."""
        running, out = HEAD, []
        for position, token in enumerate(self.tokens[rp]):
            out.append(running)
            running = mix3(running, token, position)
        return out


def test_prefill_decodes_and_corruption(xp):
    engine = Engine(xp)
    verified = engine.step([1, 2], [[101, 102, 103, 104], [201, 202, 203]])
    verified += engine.step([1, 2, 0], [[105], [204], [0]])  # a padded decode batch
    verified += engine.step([2, 1, 0], [[205], [106], [0]])
    assert engine.state.rows() == []
    for rp in (1, 2):
        for position, prev in enumerate(engine.expected_prev_hashes(rp)):
            slot = int(engine.table[rp, position])
            assert engine.state.record(slot)[:3] == [
                engine.tokens[rp][position], position, signed(prev)]
    assert engine.state.record(0)[:2] == [0, 0]  # the padding token was never written
    written = 7 + 2 + 2
    assert engine.state.counters() == (engine.launches, verified + written)

    # Corrupt request A's KV strip at position 2, and request B's canary token at position 1.
    slot_a2, slot_b1, slot_b2 = int(engine.table[1, 2]), int(engine.table[2, 1]), int(engine.table[2, 2])
    engine.kv[slot_a2, 5] = 0  # the random bytes are all non-zero: this changes the strip
    engine.state.set_field(slot_b1, kvcanary.CANARY_FIELD_TOKEN, 999)

    engine.step([1, 2, 0], [[107], [206], [0]])
    prev_a, prev_b = engine.expected_prev_hashes(1), engine.expected_prev_hashes(2)
    assert engine.state.rows() == [
        [TAG, slot_a2, 2, 103, 103, signed(prev_a[2]), signed(prev_a[2]), 4],
        [TAG, slot_b1, 1, 999, 202, signed(prev_b[1]), signed(prev_b[1]), 32],
        [TAG, slot_b2, 2, 203, 203, signed(prev_b[2]), signed(mix3(prev_b[1], 999, 1)), 1],
    ]
    messages = [kvcanary.format_violation(row, 3, False, 4) for row in engine.state.rows()]
    assert [m.split("\n")[0].split(" ")[3] for m in messages] == [
        "fail_reason=verify_real_kv_hash", "fail_reason=verify_token",
        "fail_reason=verify_chain_hash"]
    assert xp.tolist(engine.state.write_index) == [3]

    # The ring is fill-once: the next step reports the same corruption again, after these rows.
    engine.step([1, 2], [[108], [207]])
    rows = engine.state.rows()
    assert len(rows) == 6 and rows[3:] == rows[:3]
