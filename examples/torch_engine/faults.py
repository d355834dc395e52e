"""The four engine bugs the example injects, and which violations each one explains.

Each fault class is injected once, at a seeded step, into a live request (its *victim*), and
records the slots it touched. Only one injection is open at a time, so attribution is exact:

    a violation row is explained by an injection when its slot is one the injection touched,
    or the slot of the position right after a touched slot in a live request's sequence.

The second clause is the chain: a record stores the hash of its predecessor's record, so a
replaced record fails its own check and the check of the one record after it, and nothing
further. A row is matched against the open injection, and against one closed in the previous
forward: the runtime reports a forward's rows at the end of the next one, so the forward in which
an injection was closed (before its quarantine) still reports. Any other row is a false positive.

An injection is closed at its first detection, or ``HORIZON`` steps after it was injected, and
then quarantined as an operator would: a flipped byte is flipped back; a victim whose records the
fault left inconsistent is aborted, with every request that shares a block the fault damaged, and
those blocks leave the prefix cache. Without quarantine the damage would outlive the injection and
be reported later with nothing left to explain it.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Callable, Optional

import torch

from .scheduler import ForwardPlan, Scheduler
from .workload import Request

FAULT_KINDS = ("block_swap", "freed_reuse", "kv_flip", "stale_slot_mapping")
HORIZON = 12       # steps an injection waits for its detection
GRACE = 1          # forwards a closed injection still explains rows (reported a forward late)
FIRST_STEP = 8     # steps before the first injection, so requests are running
MIN_REMAINING = HORIZON + 1  # a victim outlives its horizon: quarantine, not its end, frees it


@dataclass
class Injection:
    kind: str
    due: int
    step: int = -1
    target: str = ""
    slots: set = field(default_factory=set)        # slots the injection touched
    successors: set = field(default_factory=set)   # slots whose chain link reads a touched one
    victims: list = field(default_factory=list)
    damaged_blocks: set = field(default_factory=set)
    stolen_block: Optional[int] = None
    undo: Optional[Callable[[], None]] = None
    detected_step: int = -1
    detected_row: object = None
    closed_step: int = -1
    closed_forward: int = -1
    rows_explained: int = 0

    def explains(self, slot: int) -> bool:
        return slot in self.slots or slot in self.successors


def _order(row) -> tuple:
    return row.slot_idx, row.kernel_kind


class FaultInjector:
    def __init__(self, kinds: list[str], steps: int, seed: int, real_data: str):
        self.rng = random.Random(seed * 7919 + 17)
        order = list(kinds)
        self.rng.shuffle(order)
        spacing = max(HORIZON + GRACE + 2, (steps - FIRST_STEP - HORIZON) // max(1, len(order)))
        self.queue = [Injection(kind, FIRST_STEP + i * spacing + self.rng.randrange(4))
                      for i, kind in enumerate(order)]
        self.injections = list(self.queue)
        self.open: Optional[Injection] = None
        self.flip_bytes = 16 if real_data == "partial" else None  # bytes the fingerprint covers
        self.false_positives: list[tuple[int, object]] = []
        self.forwards = 0

    # Injection -----------------------------------------------------------------------------

    def before_forward(self, step: int, plan: ForwardPlan, sched: Scheduler,
                       kv_caches: list[torch.Tensor]) -> None:
        """Injects the next due fault into this forward, if a victim qualifies."""
        if self.open or not self.queue or self.queue[0].due > step:
            return
        inj = self.queue[0]
        inject = getattr(self, "_" + inj.kind)
        if inject(inj, plan, sched, kv_caches):
            inj.step = step
            self.open = self.queue.pop(0)

    def _decode_victims(self, plan: ForwardPlan, sched: Scheduler) -> list:
        """Decode rows whose new token lands mid-block (the block already holds a token)."""
        size = sched.config.block_size
        return [(index, req, prefix) for index, (req, prefix, extend) in enumerate(plan.rows)
                if extend == 1 and prefix % size and prefix >= size
                and req.remaining >= MIN_REMAINING]

    def _block_swap(self, inj, plan, sched, kv_caches) -> bool:
        size = sched.config.block_size
        # Early in its last block, so most of the block swapped in is read past its written end.
        victims = [v for v in self._decode_victims(plan, sched) if v[2] % size <= 3]
        for _, req, prefix in self.rng.sample(victims, len(victims)):
            last = prefix // size
            exclusive = [i for i in range(last) if sched.pool.ref_count[req.blocks[i]] == 1]
            if not exclusive:
                continue
            first = self.rng.choice(exclusive)
            row = sched.table_host[req.row]
            row[first], row[last] = req.blocks[last], req.blocks[first]
            a, b = req.blocks[first], req.blocks[last]
            inj.slots = {blk * size + off for blk in (a, b) for off in range(size)}
            inj.victims, inj.damaged_blocks = [req], {b}
            inj.target = f"req {req.rid} table entries {first}<->{last} (blocks {a}, {b})"
            return True
        return False

    def _freed_reuse(self, inj, plan, sched, kv_caches) -> bool:
        size = sched.config.block_size
        for row, entry in self.rng.sample(plan.new_blocks, len(plan.new_blocks)):
            recipient = plan.rows[row][0]
            victim, index = self._held_block(plan, sched, exclude=recipient)
            if victim is None:
                return False
            block, fresh = victim.blocks[index], recipient.blocks[entry]
            # The bug: the allocator hands the recipient a block the victim still holds (as if
            # it had been freed early); the block it should have handed out stays free.
            sched.pool.uncache(block)
            sched.pool.ref_count[fresh] = 0
            sched.pool.free.append(fresh)
            recipient.blocks[entry] = block
            sched.table_host[recipient.row, entry] = block
            first, (_, prefix, extend) = plan.first_token(row), plan.rows[row]
            for position in range(prefix, prefix + extend):
                plan.slot_mapping[first + position - prefix] = sched.slot(recipient, position)
            inj.slots = {block * size + off for off in range(size)}
            inj.victims, inj.stolen_block = [victim], block
            inj.target = (f"req {victim.rid} block {block} (table entry {index}) handed to "
                          f"req {recipient.rid} while held")
            return True
        return False

    def _held_block(self, plan, sched, exclude) -> tuple:
        """A victim in this forward and one of its full blocks that a new owner would overwrite
        with other tokens: past its group's shared prefix, held by it alone, not its last."""
        size = sched.config.block_size
        for req, _, _ in self.rng.sample(plan.rows, len(plan.rows)):
            candidates = [i for i in range(req.computed // size)
                          if (i + 1) * size > req.shared_len and i < len(req.blocks) - 1
                          and sched.pool.ref_count[req.blocks[i]] == 1]
            if req is not exclude and req.remaining >= MIN_REMAINING and candidates:
                return req, self.rng.choice(candidates)
        return None, -1

    def _kv_flip(self, inj, plan, sched, kv_caches) -> bool:
        live = [(req, prefix) for req, prefix, _ in plan.rows
                if prefix >= 1 and req.remaining >= MIN_REMAINING]
        if not live:
            return False
        req, prefix = self.rng.choice(live)
        position = self.rng.randrange(prefix)
        slot = sched.slot(req, position)
        layer, half = self.rng.randrange(len(kv_caches)), self.rng.randrange(2)
        # The layer's K or V pages as one row of bytes per slot.
        num_slots = sched.pool.num_blocks * sched.config.block_size
        pages = kv_caches[layer][half].view(torch.uint8).view(num_slots, -1)
        byte = self.rng.randrange(self.flip_bytes or pages.shape[1])

        def flip() -> None:
            pages[slot, byte] ^= 0xFF

        flip()
        inj.undo = flip
        inj.slots, inj.victims = {slot}, [req]
        inj.target = (f"req {req.rid} pos {position} slot {slot} layer {layer} "
                      f"{'KV'[half]} byte {byte}")
        return True

    def _stale_slot_mapping(self, inj, plan, sched, kv_caches) -> bool:
        victims = self._decode_victims(plan, sched)
        if not victims:
            return False
        index, req, prefix = self.rng.choice(victims)
        token = plan.first_token(index)
        stale, fresh = sched.slot(req, prefix - 1), sched.slot(req, prefix)
        plan.slot_mapping[token] = stale  # the previous forward's entry, never refreshed
        inj.slots, inj.victims = {stale, fresh}, [req]
        inj.damaged_blocks = {req.blocks[prefix // sched.config.block_size]}
        inj.target = f"req {req.rid} pos {prefix} written to slot {stale} instead of {fresh}"
        return True

    # Attribution and quarantine ------------------------------------------------------------

    def after_forward(self, step: int, rows: list, sched: Scheduler) -> None:
        """Matches the rows reported in this forward to injections, then closes a due one."""
        self.forwards += 1
        if self.open:
            self._extend_successors(self.open, sched)
        candidates = [inj for inj in self.injections if inj.step >= 0 and inj.step <= step
                      and (inj.closed_forward < 0 or self.forwards - inj.closed_forward <= GRACE)]
        for row in rows:
            owner = next((inj for inj in candidates if inj.explains(row.slot_idx)), None)
            if owner is None:
                self.false_positives.append((step, row))
                continue
            owner.rows_explained += 1
            # The detection: the first step's row of lowest (slot, launch tag), as a CUDA ring
            # holds a step's rows in no fixed order.
            if owner.detected_step in (-1, step) and (
                    owner.detected_row is None or _order(row) < _order(owner.detected_row)):
                owner.detected_step, owner.detected_row = step, row
        inj = self.open
        if inj and (inj.detected_step >= 0 or step - inj.step >= HORIZON):
            self._quarantine(inj, sched)
            inj.closed_step, inj.closed_forward, self.open = step, self.forwards, None

    def _extend_successors(self, inj: Injection, sched: Scheduler) -> None:
        """Adds, for every live sequence, the slot after each position held in a touched slot."""
        for req in sched.running:
            for position in range(1, req.computed):
                if sched.slot(req, position - 1) in inj.slots:
                    inj.successors.add(sched.slot(req, position))

    def _quarantine(self, inj: Injection, sched: Scheduler) -> None:
        if inj.undo is not None:
            inj.undo()
            return
        damaged = set(inj.damaged_blocks)
        for victim in inj.victims:  # blocks the victim cached after the fault share its damage
            damaged |= {b for b in victim.blocks if sched.pool.cached_at.get(b, -1) >= inj.step}
        damaged.discard(inj.stolen_block)  # its new owner's records are sound
        sharers = [r for r in sched.running if r not in inj.victims and damaged & set(r.blocks)]
        inj.victims += sharers
        for block in damaged:
            sched.pool.uncache(block)
        keep = frozenset() if inj.stolen_block is None else frozenset({inj.stolen_block})
        for victim in inj.victims:
            if victim in sched.running:
                victim.aborted = True
                sched.release(victim, keep=keep)
