"""Sentence chunker: LLM text deltas in, speakable chunks out, as early as a sentence is complete."""

from __future__ import annotations

import re

# A sentence ends at . ! ? (optionally followed by quotes/brackets) and then whitespace; not after
# a single capital letter or a digit-dot-digit (e.g. "U.S.", "1.5").
_END = re.compile(r"(?<!\b[A-Z])(?<!\d\.\d)[.!?]+[\"')\]]*\s+|\n+")


# A clause ends at , ; : or a dash, followed by whitespace.
_CLAUSE = re.compile(r"[,;:\u2013\u2014]\s+|\s-\s")


#: No chunk is longer than this many words: a longer sentence is cut at its last clause end inside the limit
#: (else at the limit), so one synthesis - and what the TTS engine allocates for it - stays bounded.
MAX_WORDS = 40


def split_long(text: str, max_words: int = MAX_WORDS) -> list[str]:
    """``text`` in pieces of at most ``max_words`` words, cut at clause ends where there are some."""
    out: list[str] = []
    rest = text.strip()
    while True:
        words = list(re.finditer(r"\S+", rest))
        if len(words) <= max_words:
            if rest:
                out.append(rest)
            return out
        limit = words[max_words - 1].end()
        cut = max((m.end() for m in _CLAUSE.finditer(rest, 0, limit + 2) if m.end() <= limit + 2), default=0)
        if cut < len(rest) // 4 or cut == 0:
            cut = limit
        out.append(rest[:cut].strip())
        rest = rest[cut:].strip()


class SentenceChunker:
    """``first_clause``: the first chunk is the first clause (or the first ``first_words`` words), so TTS can
    start speaking early; later chunks are whole sentences (they sound better), none over ``max_words``."""

    def __init__(self, min_chars: int = 12, *, first_clause: bool = False, first_words: int = 6,
                 max_words: int = MAX_WORDS) -> None:
        self.min_chars = min_chars
        self.first_clause = first_clause
        self.first_words = first_words
        self.max_words = max_words
        self._buf = ""
        self._emitted = False

    def push(self, text: str) -> list[str]:
        self._buf += text
        out: list[str] = []
        if self.first_clause and not self._emitted:
            first = self._first_chunk()
            if first:
                out.append(first)
        start = 0
        for m in _END.finditer(self._buf):
            candidate = self._buf[start : m.end()].strip()
            if len(candidate) >= self.min_chars:
                out.extend(split_long(candidate, self.max_words))
                start = m.end()
        self._buf = self._buf[start:]
        pieces = split_long(self._buf, self.max_words)
        if len(pieces) > 1:  # a run-on sentence: say what is over the limit now
            out.extend(pieces[:-1])
            # the last piece is the end of the stripped buffer: keep it with the whitespace after it
            self._buf = self._buf[len(self._buf.rstrip()) - len(pieces[-1]):]
        if out:
            self._emitted = True
        return out

    def _first_chunk(self) -> str | None:
        """The shortest speakable prefix: up to the first clause or sentence end (at least ``min_chars``),
        or the first ``first_words`` words, whichever comes first."""
        cuts = []
        for pattern in (_END, _CLAUSE):
            for m in pattern.finditer(self._buf):
                if len(self._buf[: m.end()].strip()) >= self.min_chars:
                    cuts.append(m.end())
                    break
        words = list(re.finditer(r"\S+\s+", self._buf))
        if len(words) >= self.first_words:
            cuts.append(words[self.first_words - 1].end())
        if not cuts:
            return None
        cut = min(cuts)
        chunk, self._buf = self._buf[:cut].strip(), self._buf[cut:]
        self._emitted = True
        return chunk

    def flush(self) -> list[str]:
        rest, self._buf = self._buf.strip(), ""
        return split_long(rest, self.max_words)
