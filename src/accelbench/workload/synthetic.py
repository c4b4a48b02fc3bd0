"""Synthetic prompts of an exact length in the server's own tokens.

Method: tokenize a long seeded text once; for each prompt take a window of the wanted
number of token ids at a random offset (distinct prompts, so no accidental prefix-cache
hits), decode it, and re-tokenize to check the count: decode/encode does not always
round-trip, so the window is trimmed or extended until the count is exact (a few tries;
the closest is kept and its real length recorded otherwise).
"""

from __future__ import annotations

import numpy as np

from accelbench.workload.tokenizer import Tokenizer

# Common English words; the text is made of them in a seeded random order.
_WORDS = (
    "the of and to in is that for it as was with be by on not he this are or his from at "
    "which but have an they you were her she there been one all we their has would when "
    "if will two more other time some these up could may only first new any years then "
    "also its now like most such after than over into between what well through where "
    "much should because each those people many about state same both world under during "
    "system program house water number part large small power high course change left "
    "public order great place point government early group problem fact hand light work "
    "city market energy model memory signal value result data rate level design test "
    "measure process study field force season river music table window garden morning "
    "answer question reason history machine network server request token latency cost"
).split()


def base_text(seed: int, n_words: int) -> str:
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(_WORDS), size=n_words)
    words = [_WORDS[i] for i in idx]
    # sentences of 8-20 words so tokenizers see ordinary punctuation
    out: list[str] = []
    i = 0
    while i < len(words):
        k = int(rng.integers(8, 21))
        sent = " ".join(words[i : i + k])
        out.append(sent[:1].upper() + sent[1:] + ".")
        i += k
    return " ".join(out)


class SyntheticPrompts:
    """Makes prompts whose token count under ``tok`` is exactly the target."""

    def __init__(self, tok: Tokenizer, seed: int, max_len: int) -> None:
        self.tok = tok
        self.rng = np.random.default_rng(seed + 7919)
        n_words = max(2000, int(max_len * 2.2) + 500)
        ids: list[int] = []
        while len(ids) < max_len * 2 + 64:
            ids = tok.encode(base_text(seed, n_words))
            n_words *= 2
        self.ids = ids

    def make(self, length: int) -> tuple[str, int]:
        """A prompt and its real token count (== length unless it could not be matched)."""
        ids = self.ids
        start = int(self.rng.integers(0, len(ids) - length - 32))
        n = length
        best: tuple[str, int] | None = None
        for _ in range(8):
            text = self.tok.decode(ids[start : start + n])
            got = len(self.tok.encode(text))
            if got == length:
                return text, got
            if best is None or abs(got - length) < abs(best[1] - length):
                best = (text, got)
            n += length - got  # decode/encode merged or split tokens at the seams: adjust
            if n < 1:
                n = 1
        assert best is not None
        return best
