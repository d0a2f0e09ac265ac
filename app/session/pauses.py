"""The pause policy: what a silence in the caller's speech means, one strategy at a time.

``server_vad``'s endpointer stops the speech after ``silence_duration_ms``; on top of it, each enabled strategy
may hold the pause open or end it early (as Pipecat's ``turns/user_stop/`` strategies do):

* **hold-open** (``[vad] hold_open_ms``): words that end open ("... a filter that I") hold a stopped pause
  to ``hold_open_ms``;
* **the reading of words** (``[vad] finished_commit_ms``): the LLM reads the words at the pause; a finished turn
  ends at ``finished_commit_ms`` of silence, unfinished words hold to ``unfinished_hold_ms``;
* **semantic** (``semantic_vad``): the end-of-turn model calls the pause complete; words that end open veto it.

:class:`PausePolicy` returns decisions about a :class:`Pause` (:class:`EndTurn`, :class:`HoldOn`) or None, and
says what one comes to while the caller is still in that pause (:meth:`PausePolicy.outcome`: where the speech
stops, or nothing). It never calls back.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from sub250.metrics.timeline import now_ns
from sub250.session.stats import SessionStats
from sub250.session.tuning import PipelineTuning
from sub250.session.turn import UserTurn
from sub250.session.turn_cue import ends_open
from sub250.session.turn_detection import TurnDetector
from sub250.session.turn_words import Judgement, TurnWords

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Pause:
    """The silence after window ``last_window`` of ``turn``."""

    turn: UserTurn
    last_window: int


@dataclass(frozen=True)
class EndTurn:
    """End the speech now; ``finished``: because its words read as a finished turn (counted as such);
    ``held_only``: only while the pause is still held."""

    pause: Pause
    finished: bool = False
    held_only: bool = False


@dataclass(frozen=True)
class HoldOn:
    """The words go on (``words``): the pause goes on to ``ms``; ``rehold``: the endpointer's hold must be set
    to that length first (if it cannot, the turn ends now); ``held_only``: only while the pause is still held."""

    pause: Pause
    words: str
    ms: int
    rehold: bool = False
    held_only: bool = False


@dataclass(frozen=True)
class Settle:
    """The pause is held until its words are known: run :meth:`PausePolicy.settle`."""

    pause: Pause
    held: Any  # the Reply held at this pause


Decision = EndTurn | HoldOn


class PausePolicy:
    def __init__(self, tuning: Callable[[], PipelineTuning], detector: TurnDetector, stats: SessionStats,
                 turn_words: TurnWords | None) -> None:
        """``tuning``: the session's tuning now (it may be replaced)."""
        self._tuning, self.detector, self.stats = tuning, detector, stats
        #: The LLM's reading of the words at each pause (``[vad] finished_commit_ms``), when the engine can say.
        self.turn_words = turn_words
        #: The pause whose words were read as a finished turn: it ends at ``finished_commit_ms`` of silence.
        self.finished: Pause | None = None

    @property
    def tuning(self) -> PipelineTuning:
        return self._tuning()

    # --- what a decision comes to ---------------------------------------------------------------------

    def outcome(self, decision: Decision | None, turn: UserTurn | None) -> int | None:
        """Carry ``decision`` out for the caller's ``turn`` now: the last speech window where the turn's speech
        stops, or None - the pause holds on, or the decision is void (the caller spoke again, or the turn
        ended, meanwhile)."""
        if decision is None or not self.still_in(decision.pause, turn) or \
                (decision.held_only and not self.detector.holding):
            return None
        if isinstance(decision, HoldOn) and (not decision.rehold or self.detector.rehold(decision.ms)):
            self.held_open(decision.words, decision.ms)
            return None
        finished = isinstance(decision, EndTurn) and decision.finished
        if finished:
            self.finished = None
        if (stopped := self.detector.end_now()) is None:
            return None
        if finished:
            self.stats.pause_finished()
        return stopped.window

    def still_in(self, pause: Pause, turn: UserTurn | None) -> bool:
        """The caller is still in ``pause`` of ``turn`` (no speech since, no commit)."""
        return turn is pause.turn and self.detector.speaking and self.detector.last_speech_window == pause.last_window

    def held_open(self, words: str, ms: int) -> None:
        self.stats.pause_held_open()
        log.info("the words go on (%r): the pause goes on to %d ms", words[-40:], ms)

    # --- the reading of words ------------------------------------------------------------------------

    @property
    def reads_words(self) -> bool:
        return self.turn_words is not None and self.detector.semantic is None

    async def read_words(self, pause: Pause, held: Any) -> Decision | None:
        """The LLM reads the words at this pause; a finished turn ends at ``finished_commit_ms`` of silence (at
        once if it has passed: also when the pause is held waiting for this very reading)."""
        assert self.turn_words is not None
        judgement = await asyncio.shield(self.turn_words.judge(held))
        if judgement is None:
            return None
        log.info("the words %r read as %s (log P(end) %s, %s ms)", judgement.words[-40:],
                 "a finished turn" if judgement.finished else "going on",
                 "-" if judgement.logprob is None else f"{judgement.logprob:.2f}",
                 "-" if judgement.ms is None else f"{judgement.ms:.0f}")
        if not judgement.finished:
            return None  # server_vad's stop holds it (``stopped``)
        if self.detector.silence_ms >= self.tuning.finished_commit_ms or self.detector.holding:
            return EndTurn(pause, finished=True)
        self.finished = pause
        return None

    def finished_due(self) -> Pause | None:
        """The pause read as finished, once its silence reached ``finished_commit_ms``."""
        if self.finished is not None and self.detector.silence_ms >= self.tuning.finished_commit_ms:
            return self.finished
        return None

    def turn_over(self) -> None:
        """The turn is over: a reading under way is of no use."""
        self.finished = None
        if self.turn_words is not None:
            self.turn_words.too_late()

    # --- hold-open -----------------------------------------------------------------------------------

    def stopped(self, pause: Pause, held: Any) -> HoldOn | Settle | None:
        """``server_vad`` stopped the speech after ``pause``: if the words so far go on (they end open, or the LLM
        reads them as unfinished), the stop is taken back - the pause ends the turn after ``hold_open_ms``
        (``unfinished_hold_ms`` for unfinished words that do not end open). Words not known yet (a busy engine)
        hold the pause until they are (:class:`Settle`), at most ``hold_open_ms``; a reading not known yet, until
        it is - at most ``unfinished_hold_ms``. None: the stop stands."""
        ms = self.tuning.hold_open_ms
        if not ms or held is None or self.detector.semantic is not None:
            return None
        hold = self._hold_for(held)
        if hold == 0 or not self.detector.hold(ms if hold is None else hold):
            return None
        if hold is None:
            return Settle(pause, held)
        return HoldOn(pause, held.question or "", hold)

    def _hold_for(self, held: Any) -> int | None:
        """How long the pause after the held reply's words lasts in all: ``hold_open_ms`` for words that end open,
        ``unfinished_hold_ms`` (or ``hold_open_ms``) for words the LLM reads as unfinished, 0 for words that may
        end the turn; None: not known yet."""
        if self.turn_words is not None:
            task = self.turn_words.judge(held)
            if not task.done():
                return None
            if not task.cancelled() and (judgement := task.result()) is not None:
                return self._hold_ms(judgement)
        if held.question is None:
            return None
        return self.tuning.hold_open_ms if ends_open(held.question) else 0

    def _hold_ms(self, judgement: Judgement) -> int:
        if judgement.finished:
            return 0
        if judgement.logprob is None or not self.tuning.unfinished_hold_ms:  # open words, or held as long
            return self.tuning.hold_open_ms
        return self.tuning.unfinished_hold_ms

    async def settle(self, pause: Pause, held: Any) -> Decision | None:
        """A pause held while its words are transcribed and read: words that go on keep it held, to their own
        length; any others end the turn now (none by ``hold_open_ms``: the hold's own silence ends it). The
        LLM's reading is waited for until the pause reaches ``unfinished_hold_ms`` - what an "unfinished" would
        hold it to, so a late reading never makes the caller wait longer than its verdict could; then it is
        stopped and the words alone decide, as without it (docs/lab/JOURNAL.md §36)."""
        judgement = None
        if self.turn_words is not None:
            until_ms = self.tuning.unfinished_hold_ms or self.tuning.hold_open_ms
            judgement = await self._judged(held, max(0, until_ms - self.detector.silence_ms) / 1000)
            if judgement is None:
                self.turn_words.too_late(held)
        words: str | None
        hold: int | None
        if judgement is not None:
            hold, words = self._hold_ms(judgement), judgement.words
        else:
            words = await held.words.wait(max(0, self.tuning.hold_open_ms - self.detector.silence_ms) / 1000)
            hold = None if words is None else self.tuning.hold_open_ms if ends_open(words) else 0
        if hold is None or words is None:
            return None
        if hold:
            return HoldOn(pause, words, hold, rehold=hold != self.tuning.hold_open_ms, held_only=True)
        return EndTurn(pause, held_only=True)

    async def _judged(self, held: Any, wait_s: float) -> Judgement | None:
        assert self.turn_words is not None
        try:
            return await asyncio.wait_for(asyncio.shield(self.turn_words.judge(held)), wait_s)
        except TimeoutError:
            return None

    # --- semantic ------------------------------------------------------------------------------------

    async def complete(self, model: Any, pause: Pause, audio: np.ndarray, held: Any) -> Decision | None:
        """``semantic_vad``: the caller paused; if the end-of-turn ``model`` calls the turn complete, it ends now
        rather than at the cap - unless the held reply's words end open (then the cap ends the pause)."""
        t0 = now_ns()
        try:
            p = await model.run(model.probability, audio)
        except Exception:  # the cap still ends the turn
            log.warning("the end-of-turn model failed", exc_info=True)
            return None
        ms = (now_ns() - t0) / 1e6
        self.stats.end_of_turn_scored(ms)
        timing = self.detector.semantic
        log.debug("end of turn p=%.2f (%.0f ms)", p, ms)
        if timing is None or p < timing.threshold:
            return None  # not complete
        if held is not None and self.tuning.hold_open_ms and \
                (words := await held.words.wait(timing.cap_ms / 1000)) is not None and ends_open(words):
            return HoldOn(pause, words, timing.cap_ms)  # "complete" vetoed
        return EndTurn(pause)
