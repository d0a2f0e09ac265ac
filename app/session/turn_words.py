"""The caller's words at a pause, read by the served LLM: a finished turn, or one that goes on.

The reply the session holds at a pause transcribes the caller's words so far; the LLM then says how likely a
user message ends right there (``LLMEngine.turn_end_logprob``: the log-probability that the next token ends the
sentence - "?", ".", "!" - or the message, the idea of LiveKit's turn detector on the model as it is). Words that
end open (``app/session/turn_cue.py``) go on without asking. With ``server_vad`` the session commits a pause whose
words are a finished turn after ``[vad] finished_commit_ms`` of silence, sooner than ``silence_duration_ms``, and
holds a pause whose words it reads as unfinished to ``[vad] unfinished_hold_ms`` (app/session/session.py); a
reading not known by ``silence_duration_ms`` holds the pause until it is. Thresholds from the endpointing
benchmark (``scripts/bench_endpointing.py --words``, docs/BENCHMARKS.md §35).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any

from app.protocol.events import new_id
from app.llm.base import LLMEngine
from app.session.reply import Reply
from app.session.turn_cue import as_said, ends_open

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Judgement:
    words: str
    #: The words read as a whole turn: log P(end) at least the threshold, and not ending open.
    finished: bool
    #: The LLM's log P(the message ends here); None for words that end open (not asked).
    logprob: float | None = None
    #: How long the LLM took (ms); None when not asked.
    ms: float | None = None


class TurnWords:
    """Judges the words of one held reply at a time (each once, whoever asks)."""

    def __init__(self, llm: LLMEngine, threshold: float, *, wait_s: float,
                 spawn: Callable[[Coroutine[Any, Any, Any]], asyncio.Task]) -> None:
        self.llm, self.threshold, self.wait_s, self._spawn = llm, threshold, wait_s, spawn
        self._reply: Reply | None = None
        self._task: asyncio.Task[Judgement | None] | None = None

    def judge(self, held: Reply) -> asyncio.Task[Judgement | None]:
        """The judgement of ``held``'s words (a task: started at the first ask). Its result is None when the words
        are not known within ``wait_s`` or the LLM could not read them (the session then goes by silence)."""
        if self._reply is not held or self._task is None:
            self._reply, self._task = held, self._spawn(self._judge(held))
        return self._task

    async def _judge(self, held: Reply) -> Judgement | None:
        words = await held.words(self.wait_s)
        if words is None:
            return None
        if ends_open(words):
            return Judgement(words, finished=False)
        said = as_said(words)
        if not said:
            return None
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        try:
            logprob = await self.llm.turn_end_logprob(said, new_id("eot"))
        except Exception:  # the pause then ends on silence, as without the judgement
            log.warning("the LLM could not judge the words %r", said[-60:], exc_info=True)
            return None
        if logprob is None:
            return None
        return Judgement(words, finished=logprob >= self.threshold, logprob=logprob, ms=(loop.time() - t0) * 1000)
