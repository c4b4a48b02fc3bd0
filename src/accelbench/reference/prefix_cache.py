"""The reference server's prefix cache: the ideal rule, as ground truth.

The rule (the one accelbench's ideal hit rate uses; written here on its own, so that the
two are checked against each other, not against one shared piece of code):

* Block size B tokens (the reference server's tokens are bytes). A prompt of L tokens has
  ``L // B`` full blocks; block j's identity is a chained hash of blocks 0..j, so equal
  identity means equal content *and* equal prefix.
* On arrival: the hit blocks are the longest run of leading blocks present in the cache,
  at most ``(L - 1) // B`` of them (at least one token is always computed, as vLLM does);
  ``cached_tokens`` = hit blocks x B. The hit blocks are touched (most recently used),
  then every full prompt block is inserted or touched, in order.
* On completion (the last token written), if outputs are cached: the full blocks of
  prompt + output are inserted or touched, in order.
* Capacity N blocks: inserting into a full cache evicts the least recently used block.

Each block of a request is hashed once (the prompt's blocks on arrival, the blocks that
prompt + output adds on completion); the cache holds at most N digests of 16 bytes.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from dataclasses import dataclass

DIGEST_BYTES = 16


def chain_hashes(data: bytes, block_size: int, prev: bytes = b"") -> list[bytes]:
    """The identities of ``data``'s full blocks: block j's is
    blake2b(identity of block j-1 + block j's bytes); ``prev`` is the identity of the
    block before ``data`` (empty for a prompt's first block)."""
    out: list[bytes] = []
    append, blake = out.append, hashlib.blake2b  # about 1.5 us a block on one core
    for start in range(0, len(data) - block_size + 1, block_size):
        prev = blake(prev + data[start : start + block_size], digest_size=DIGEST_BYTES).digest()
        append(prev)
    return out


@dataclass
class Admission:
    """What the cache did for one request's prompt; ``complete`` continues from it."""

    prompt_tokens: int
    cached_tokens: int
    hashes: list[bytes]  # the prompt's full blocks
    tail: bytes  # the prompt's bytes after its last full block
    evicted: int  # blocks evicted by this request so far (arrival, then completion)


class PrefixCache:
    """An LRU cache of block identities, ``capacity`` blocks of ``block_size`` tokens.
    Counters are vLLM's: queries and hits in tokens, and blocks evicted."""

    def __init__(self, block_size: int, capacity: int) -> None:
        if block_size < 1 or capacity < 1:
            raise ValueError("a prefix cache needs a block size and a capacity of 1 or more")
        self.block_size = block_size
        self.capacity = capacity
        self._blocks: OrderedDict[bytes, None] = OrderedDict()
        self.queries_tokens = 0
        self.hit_tokens = 0
        self.evicted_blocks = 0

    def __len__(self) -> int:
        return len(self._blocks)

    def _insert(self, hashes: list[bytes]) -> int:
        """Insert or touch each block in order; the number of blocks evicted."""
        blocks, evicted = self._blocks, 0
        for h in hashes:
            if h in blocks:
                blocks.move_to_end(h)
                continue
            if len(blocks) >= self.capacity:
                blocks.popitem(last=False)
                evicted += 1
            blocks[h] = None
        self.evicted_blocks += evicted
        return evicted

    def arrive(self, prompt: bytes) -> Admission:
        """A request's prompt arrives: its cached tokens, and its blocks inserted."""
        b = self.block_size
        hashes = chain_hashes(prompt, b)
        limit = max(0, (len(prompt) - 1) // b)
        hit = 0
        while hit < limit and hashes[hit] in self._blocks:
            hit += 1
        # touching the hit blocks, then inserting or touching every full block in order,
        # leaves the same order as the second step alone: the hit blocks are its prefix
        evicted = self._insert(hashes)
        self.queries_tokens += len(prompt)
        self.hit_tokens += hit * b
        return Admission(len(prompt), hit * b, hashes, prompt[len(hashes) * b :], evicted)

    def complete(self, adm: Admission, output: bytes) -> int:
        """The request's last token was written: prompt + output blocks inserted in order
        (only the blocks the output completes are hashed); the blocks this evicted."""
        more = chain_hashes(
            adm.tail + output, self.block_size, adm.hashes[-1] if adm.hashes else b""
        )
        evicted = self._insert(adm.hashes + more)
        adm.evicted += evicted
        return evicted
