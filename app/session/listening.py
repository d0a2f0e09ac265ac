"""While the caller speaks: partial transcripts of the speech so far, and retrieval ahead of the commit.

A partial is attempted every ``PARTIAL_EVERY_MS`` of new speech, at most one at a time, and skipped while the
ASR engine is busy (a final transcript must not wait behind it). Once partials are stable - each repeats the
one before and grows it, with enough words to search on - the newest is searched in the background; the
result lands in the query cache, where the committed question finds it (exact, or near enough: see
``app/rag/query_cache.py``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from typing import Any

from sub250.asr.base import ASREngine, Need
from sub250.audio.endpointing import WINDOW_MS
from sub250.audio.rates import ASR_RATE
from sub250.metrics.timeline import now_ns
from sub250.protocol import server_events as ev
from sub250.rag.base import BaseRetriever
from sub250.rag.query_cache import normalize as normalize_query
from sub250.session.input_buffer import InputBuffer
from sub250.session.turn import UserTurn

log = logging.getLogger(__name__)

#: A partial transcript is attempted after this much new speech.
PARTIAL_EVERY_MS = 700
#: A stable partial transcript is searched ahead of the commit once it has this many words.
MIN_AHEAD_WORDS = 4

Spawn = Callable[[Coroutine[Any, Any, None]], asyncio.Task]


class Listening:
    def __init__(self, asr: ASREngine, retriever: BaseRetriever | None, *, window: str,
                 send: Callable[[dict[str, Any]], None], spawn: Spawn) -> None:
        self.asr, self.retriever, self.window = asr, retriever, window
        #: The session's ``audio.input.transcription.prompt`` (None: the profile's).
        self.prompt: str | None = None
        self._send, self._spawn = send, spawn
        self._turn: UserTurn | None = None
        self._last_window = 0
        self._partial: asyncio.Task | None = None

    def begin(self, turn: UserTurn, window: int) -> None:
        """The caller started speaking at ``window``."""
        self._turn = turn
        self._last_window = window

    def end(self) -> None:
        """The turn is committed or cleared: a partial in flight is no longer wanted."""
        self._turn = None
        if self._partial is not None:
            self._partial.cancel()
            self._partial = None

    def heard(self, buffer: InputBuffer) -> None:
        """More speech arrived: maybe start a partial transcript of the turn so far."""
        turn = self._turn
        if turn is None or self._partial is not None or self.asr.busy:
            return
        end = buffer.end
        if (end - self._last_window) * WINDOW_MS < PARTIAL_EVERY_MS:
            return
        self._last_window = end
        audio = buffer.audio(turn.first_window)
        self._partial = self._spawn(self._transcribe(turn, audio))

    async def _transcribe(self, turn: UserTurn, audio: Any) -> None:
        try:
            text = (await self.asr.recognize(audio, window=self.window, prompt=self.prompt, need=Need.PARTIAL)).text
            if self._turn is turn and text:
                self._send(ev.transcript_partial(turn.item_id, text, int(audio.size * 1000 / ASR_RATE)))
                self._ahead(turn, text)
        finally:
            if self._partial is asyncio.current_task():
                self._partial = None

    def _ahead(self, turn: UserTurn, text: str) -> None:
        previous = turn.partials[-1] if turn.partials else None
        turn.partials.append(text)
        retriever = self.retriever
        if retriever is None or retriever.cache is None or previous is None:
            return
        now, before = normalize_query(text), normalize_query(previous)
        if len(now.split()) < MIN_AHEAD_WORDS or not now.startswith(before):
            return
        self._spawn(self._search(retriever, turn, text))

    @staticmethod
    async def _search(retriever: BaseRetriever, turn: UserTurn, text: str) -> None:
        t0 = now_ns()
        try:
            await retriever.retrieve(text, count=False)
        except Exception:  # ahead of time only: the commit searches (and reports) again
            log.debug("retrieval ahead failed", exc_info=True)
            return
        turn.prefetch_ms = (now_ns() - t0) / 1e6
