"""Sentence chunker: LLM text deltas in, speakable chunks out, as early as a sentence is complete."""

from __future__ import annotations

import re

# A sentence ends at . ! ? (optionally followed by quotes/brackets) and then whitespace; not after
# a single capital letter or a digit-dot-digit (e.g. "U.S.", "1.5").
_END = re.compile(r"(?<!\b[A-Z])(?<!\d\.\d)[.!?]+[\"')\]]*\s+|\n+")


# A clause ends at , ; : or a dash, followed by whitespace.
_CLAUSE = re.compile(r"[,;:\u2013\u2014]\s+|\s-\s")


class SentenceChunker:
    """``first_clause``: the first chunk is the first clause (or the first ``first_words`` words), so TTS can
    start speaking early; later chunks are whole sentences (they sound better)."""

    def __init__(self, min_chars: int = 12, *, first_clause: bool = False, first_words: int = 6) -> None:
        self.min_chars = min_chars
        self.first_clause = first_clause
        self.first_words = first_words
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
                out.append(candidate)
                start = m.end()
        self._buf = self._buf[start:]
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
        return [rest] if rest else []
