"""Block allocation with reference counts, a prefix cache, and LRU eviction.

A block holds ``block_size`` consecutive tokens of one sequence. Requests with equal prompt
prefixes share the full blocks of that prefix: each full block is keyed by the hash of all tokens
up to its end, so a key names one exact prefix. A block's reference count is the number of live
requests whose block table holds it. At zero, a cached block stays in the cache (evictable, least
recently used first) and an uncached one goes back to the free list. Block 0 is never handed out:
it is the padding block, and its slot 0 is kvcanary's padding slot.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Optional, Sequence


def block_keys(tokens: Sequence[int], block_size: int, num_blocks: int) -> list[int]:
    """The prefix-cache key of each of the first ``num_blocks`` full blocks of ``tokens``."""
    keys, key = [], 0
    for i in range(num_blocks):
        key = hash((key, tuple(tokens[i * block_size:(i + 1) * block_size])))
        keys.append(key)
    return keys


class BlockPool:
    def __init__(self, num_blocks: int, block_size: int):
        self.num_blocks = num_blocks
        self.block_size = block_size
        self.ref_count = [0] * num_blocks
        self.free: list[int] = list(range(num_blocks - 1, 0, -1))  # LIFO; block 0 is padding
        self.key_of: dict[int, int] = {}          # cached block -> its prefix key
        self.block_of: dict[int, int] = {}        # prefix key -> cached block
        self.cached_at: dict[int, int] = {}       # cached block -> step it entered the cache
        self.evictable: OrderedDict[int, None] = OrderedDict()  # cached, unreferenced; LRU first
        self.evictions = 0
        self.hits = 0

    def available(self) -> int:
        """Blocks an allocation can get: free ones and evictable cached ones."""
        return len(self.free) + len(self.evictable)

    def allocate(self) -> int:
        if self.free:
            block = self.free.pop()
        elif self.evictable:
            block, _ = self.evictable.popitem(last=False)
            self._forget(block)
            self.evictions += 1
        else:
            raise RuntimeError("block pool exhausted (admission should have prevented this)")
        self.ref_count[block] = 1
        return block

    def lookup(self, key: int) -> Optional[int]:
        return self.block_of.get(key)

    def acquire_cached(self, block: int) -> None:
        """A new request shares a cached block."""
        self.evictable.pop(block, None)
        self.ref_count[block] += 1
        self.hits += 1

    def register(self, block: int, key: int, step: int) -> None:
        """A block just became full: cache it under its prefix key, unless that key is cached."""
        if block in self.key_of or key in self.block_of:
            return
        self.key_of[block], self.block_of[key], self.cached_at[block] = key, block, step

    def release(self, block: int) -> None:
        self.ref_count[block] -= 1
        if self.ref_count[block] > 0:
            return
        if block in self.key_of:
            self.evictable[block] = None  # most recently used: evicted last
        else:
            self.free.append(block)

    def uncache(self, block: int) -> None:
        """Drops ``block`` from the prefix cache (its content must not be shared again)."""
        if block not in self.key_of:
            return
        self._forget(block)
        if self.evictable.pop(block, "absent") is None:
            self.free.append(block)

    def _forget(self, block: int) -> None:
        del self.block_of[self.key_of.pop(block)]
        del self.cached_at[block]
