"""The arbiter of a suspected interruption: the sound over a live reply, held as one :class:`Suspect`.

:class:`~sub250.session.interruption.InterruptionCheck` says when to check the sound and what a transcript
means; the arbiter keeps the one suspect a session can have (its check, the paused reply, the check under way,
where the sound stopped) and turns each thing that happens to it into decisions the session carries out:
:class:`Resume` the reply, run a :class:`Check` of the sound so far, :class:`Confirm` the interruption (the
caller's turn), :class:`Dismiss` it (a cough: the reply plays on). It never calls back and runs nothing itself.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import Any

from sub250.asr.base import Transcript
from sub250.audio.endpointing import WINDOW_MS
from sub250.session.interruption import InterruptionCheck, Verdict

log = logging.getLogger(__name__)


@dataclass
class Suspect:
    """A suspected interruption of ``reply`` (paused meanwhile)."""

    check: InterruptionCheck
    reply: Any  # the Reply paused for it
    #: The transcription of the sound under way, if any.
    task: asyncio.Task | None = None
    #: The last speech window, once the sound has stopped.
    stopped: int | None = None


@dataclass(frozen=True)
class Resume:
    """Play the paused reply on (the sound went on without words for ``resume_after_ms``, or was dismissed)."""

    reply: Any


@dataclass(frozen=True)
class Check:
    """Transcribe the sound from ``first_window`` to ``end`` (inclusive) and hand the result to :meth:`heard`."""

    check: InterruptionCheck
    first_window: int
    end: int


@dataclass(frozen=True)
class Confirm:
    """Words: the caller takes the turn from ``onset_window``, interrupting ``reply``; ``stopped``: the sound
    had already stopped there (the turn is over too)."""

    reply: Any
    onset_window: int
    stopped: int | None


@dataclass(frozen=True)
class Dismiss:
    """Not an interruption: nothing of the sound reaches the conversation; ``resume``: the reply is still
    paused (it was not resumed at the timeout already)."""

    reply: Any
    resume: bool


Decision = Resume | Check | Confirm | Dismiss


def _figure(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


class InterruptionArbiter:
    def __init__(self) -> None:
        self.suspect: Suspect | None = None

    @property
    def active(self) -> bool:
        return self.suspect is not None

    def begin(self, check: InterruptionCheck, reply: Any) -> None:
        """Sound over a live reply (which the session pauses): words, or a cough?"""
        self.clear()
        self.suspect = Suspect(check, reply)

    def sound(self, end: int, *, paused: bool = False) -> list[Decision]:
        """More of the sound (or its first pause), up to window ``end``: resume the reply after
        ``resume_after_ms`` without words; check the sound so far when a check is due."""
        s = self.suspect
        if s is None:
            return []
        decisions: list[Decision] = []
        if s.check.timed_out(end):
            decisions.append(Resume(s.reply))
        if s.task is None and s.check.due(end, paused=paused or s.stopped is not None):
            s.check.started(end)
            decisions.append(Check(s.check, s.check.first_window, end))
        return decisions

    def checking(self, task: asyncio.Task) -> None:
        """The session runs the check it was told to in ``task``."""
        if self.suspect is not None:
            self.suspect.task = task

    def checked(self, task: asyncio.Task | None) -> None:
        """A check's task has ended (whatever its result)."""
        if self.suspect is not None and self.suspect.task is task:
            self.suspect.task = None

    def heard(self, check: InterruptionCheck, transcript: Transcript | None, end: int, now: int) -> list[Decision]:
        """A check's transcript of the sound up to ``end`` (``now``: the last window in); None: the check
        failed, and unsure means the caller's words (the barge-in of old), never a cough."""
        s = self.suspect
        if s is None or check is not s.check:
            return []  # the suspect was settled meanwhile
        verdict = Verdict.CONFIRMED if transcript is None else check.result(transcript, end)
        if transcript is not None:
            log.info("sound over the reply, %d ms: %r (no-speech %s, mean log-prob %s; heard in %.0f ms) -> %s",
                     (end - check.onset_window + 1) * WINDOW_MS, transcript.text, _figure(transcript.no_speech_prob),
                     _figure(transcript.avg_logprob), transcript.compute_seconds * 1000, verdict.value)
        if verdict is Verdict.CONFIRMED:
            return [self.confirm()]
        if s.stopped is not None:
            return self._settle(now)
        return self.sound(now)

    def sound_started(self) -> None:
        """The sound goes on after a stop: the same suspected interruption."""
        if self.suspect is not None:
            self.suspect.stopped = None

    def sound_stopped(self, last_window: int, now: int) -> list[Decision]:
        """The sound stopped after ``last_window`` (``now``: the last window in)."""
        s = self.suspect
        if s is None:
            return []
        s.stopped = last_window
        return self._settle(now) if s.task is None else []

    def _settle(self, end: int) -> list[Decision]:
        """The sound stopped: dismiss it once a check has covered all of it, else check the rest."""
        s = self.suspect
        if s is None or s.stopped is None:
            return []
        done = s.check.ended(s.stopped)
        if done is None:
            return self.sound(end, paused=True)
        return [self.dismiss()] if done else []

    def confirm(self) -> Confirm:
        """It is the caller's turn (their words, or the client committed the sound)."""
        s = self.suspect
        assert s is not None
        self.clear()
        return Confirm(s.reply, s.check.onset_window, s.stopped)

    def dismiss(self) -> Dismiss:
        s = self.suspect
        assert s is not None
        self.clear()
        return Dismiss(s.reply, resume=not s.check.resumed)

    def clear(self) -> None:
        """Forget the suspect; a check under way is cancelled."""
        if self.suspect is not None and self.suspect.task is not None:
            self.suspect.task.cancel()
        self.suspect = None
