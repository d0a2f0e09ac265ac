"""Sentence chunker: LLM text deltas in, speakable chunks out, as early as a sentence is complete."""

from __future__ import annotations

import re

# A sentence ends at . ! ? (optionally followed by quotes/brackets) and then whitespace; not after
# a single capital letter or a digit-dot-digit (e.g. "U.S.", "1.5").
_END = re.compile(r"(?<!\b[A-Z])(?<!\d\.\d)[.!?]+[\"')\]]*\s+|\n+")


class SentenceChunker:
    def __init__(self, min_chars: int = 12) -> None:
        self.min_chars = min_chars
        self._buf = ""

    def push(self, text: str) -> list[str]:
        self._buf += text
        out: list[str] = []
        start = 0
        for m in _END.finditer(self._buf):
            candidate = self._buf[start : m.end()].strip()
            if len(candidate) >= self.min_chars:
                out.append(candidate)
                start = m.end()
        self._buf = self._buf[start:]
        return out

    def flush(self) -> list[str]:
        rest, self._buf = self._buf.strip(), ""
        return [rest] if rest else []
