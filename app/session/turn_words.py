"""The caller's words at a pause, read by the served LLM: a finished turn, or one that goes on.

The reply the session holds at a pause transcribes the caller's words so far; the LLM then says how likely a
user message ends right there (``LLMEngine.turn_end_logprob``: the log-probability that the next token ends the
sentence - "?", ".", "!" - or the message, the idea of LiveKit's turn detector on the model as it is). Words that
end open (``app/session/turn_cue.py``) go on without asking. With ``server_vad`` the session commits a pause whose
words are a finished turn after ``[vad] finished_commit_ms`` of silence, sooner than ``silence_duration_ms``, and
holds a pause whose words it reads as unfinished to ``[vad] unfinished_hold_ms`` (app/session/pauses.py); a
reading not known by ``silence_duration_ms`` holds the pause until it is, at most ``unfinished_hold_ms``; then it
is stopped and the pause goes by silence and open words, as without it. Thresholds from the endpointing
benchmark (``scripts/bench_endpointing.py --words``, docs/BENCHMARKS.md §35).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any

from sub250.llm.base import LLMEngine
from sub250.protocol.events import new_id
from sub250.session.reply import Reply
from sub250.session.turn_cue import as_said, ends_open

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


class _Reading:
    """One held reply's reading: its task, the LLM call under way, and whether it came too late to be of use."""

    def __init__(self, held: Reply) -> None:
        self.held = held
        self.task: asyncio.Task[Judgement | None] | None = None
        self.call: asyncio.Future[float | None] | None = None
        self.late = False

    def stop(self) -> None:
        """No use any more: a call under way is cancelled (vLLM aborts it), none starts."""
        self.late = True
        if self.call is not None:
            self.call.cancel()


class TurnWords:
    """Judges the words of one held reply at a time (each once, whoever asks)."""

    def __init__(self, llm: LLMEngine, threshold: float, *, wait_s: float,
                 spawn: Callable[[Coroutine[Any, Any, Any]], asyncio.Task]) -> None:
        self.llm, self.threshold, self.wait_s, self._spawn = llm, threshold, wait_s, spawn
        self._reading: _Reading | None = None

    def judge(self, held: Reply) -> asyncio.Task[Judgement | None]:
        """The judgement of ``held``'s words (a task: started at the first ask; the reading of an earlier held
        reply, whose pause is over, stops). Its result is None when the words are not known within ``wait_s``,
        the LLM could not read them, or the reading came too late (:meth:`too_late`): the session then goes by
        silence and open words."""
        reading = self._reading
        if reading is None or reading.held is not held:
            if reading is not None:
                reading.stop()
            reading = self._reading = _Reading(held)
            reading.task = self._spawn(self._judge(reading))
        assert reading.task is not None
        return reading.task

    def too_late(self, held: Reply | None = None) -> None:
        """The pause is decided without the reading under way (it did not come by ``unfinished_hold_ms``, or the
        turn ended): it stops, or never starts - one that comes later is of no use and only takes the CPU that
        the replies need (docs/BENCHMARKS.md §36). A finished reading stays; with ``held``, only that held
        reply's reading stops (a later pause's is not this one's to stop)."""
        if self._reading is not None and (held is None or self._reading.held is held):
            self._reading.stop()

    async def _judge(self, reading: _Reading) -> Judgement | None:
        words = await reading.held.words.wait(self.wait_s)
        if words is None:
            log.info("the words at the pause were not known within %.1f s: it goes by silence", self.wait_s)
            return None
        if ends_open(words):
            return Judgement(words, finished=False)
        said = as_said(words)
        if not said or reading.late:
            return None
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        reading.call = asyncio.ensure_future(self.llm.turn_end_logprob(said, new_id("eot")))
        try:
            logprob = await reading.call
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if reading.late and (current is None or not current.cancelling()):
                log.info("the reading of %r came too late: stopped after %.0f ms", said[-40:],
                         (loop.time() - t0) * 1000)
                return None
            raise
        except Exception:  # the pause then ends on silence, as without the judgement
            log.warning("the LLM could not judge the words %r", said[-60:], exc_info=True)
            return None
        finally:
            reading.call = None
        if logprob is None:
            return None
        return Judgement(words, finished=logprob >= self.threshold, logprob=logprob, ms=(loop.time() - t0) * 1000)
