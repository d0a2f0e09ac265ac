"""False interruptions: a cough, a click or an "mm-hm" while the reply plays must not end it.

When the caller's speech starts over a live reply, the reply is **paused** at once (no new audio or text
leaves; on WebRTC the server's track stops playing) and nothing is said to the client yet. The caller's sound
is then transcribed with the fast window, first after ``check_after_ms`` of it, again as more comes and at
its first pause:

* **words** (anything but a filler or a backchannel, and Whisper's no-speech probability below
  ``max_no_speech_prob``) *confirm* it: only now does the client get ``input_audio_buffer.speech_started``
  (with the true ``audio_start_ms``), the reply is cancelled (``turn_detected``) and the turn goes on as any;
* no words by the end of the sound *dismiss* it: the reply resumes where it stopped, the sound is dropped (no
  item, no event: for the client nothing happened), and the session counts a false interruption. After
  ``resume_after_ms`` without words the reply resumes even while the sound goes on (a TV, music); words
  that still come then confirm it late.

A standard client that stops its playback at ``speech_started`` therefore never stops for a cough.
:class:`InterruptionCheck` is the sans-I/O part (when to check, what a transcript means); the session runs
the transcriptions and acts on its verdicts.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass
from typing import Any

from app.asr.base import Transcript
from app.audio.endpointing import WINDOW_MS

#: Sounds and words that do not take the turn while the assistant speaks (lower case, punctuation stripped).
BACKCHANNELS = frozenset({
    "mm", "mmm", "hm", "hmm", "hmmm", "mhm", "mm-hmm", "mm-hm", "mmhmm", "uh-huh", "uhhuh", "uh", "um", "umm",
    "uhm", "er", "erm", "ah", "ahh", "oh", "ohh", "ooh", "ow", "aha", "huh", "yeah", "yep", "yup", "yes", "ok",
    "okay", "right", "sure", "alright", "cool", "nice", "wow", "i", "see"})
#: How Whisper spells a hum it does not know ("M.", "MMA", "Ememam."): m's alone, two or more m's each perhaps
#: after an e or an a (and a final a), or h's and m's alone. Real words ("me", "am", "he", "ma'am") do not match.
_HUM = re.compile(r"m+|(?:[ea]?m){2,}a?|m+h+m*|h+m+")
#: Whisper's annotations of non-speech: "(coughs)", "[MUSIC]", "*sigh*", "♪".
_ANNOTATION = re.compile(r"\([^)]*\)|\[[^\]]*\]|\*[^*]*\*|♪")
_WORD = re.compile(r"[a-z0-9]+(?:['-][a-z0-9]+)*")


@dataclass(frozen=True)
class InterruptionOptions:
    """``[interruption]`` in the profile."""

    #: Check speech over a live reply for words before cancelling it; False: any speech cancels at once.
    enabled: bool = True
    #: The first check, after this much of the caller's sound (ms from its first speech window).
    check_after_ms: int = 224
    #: Later checks while the sound goes on, each after this much more of it.
    recheck_ms: int = 192
    #: Resume the paused reply after this long without words, even if the sound goes on.
    resume_after_ms: int = 1500
    #: A transcript counts only below this no-speech probability (Whisper invents words on noise).
    max_no_speech_prob: float = 0.5

    @classmethod
    def from_stage(cls, stage: dict[str, Any]) -> "InterruptionOptions":
        d = cls()
        return cls(enabled=bool(stage.get("enabled", d.enabled)),
                   check_after_ms=int(stage.get("check_after_ms", d.check_after_ms)),
                   recheck_ms=int(stage.get("recheck_ms", d.recheck_ms)),
                   resume_after_ms=int(stage.get("resume_after_ms", d.resume_after_ms)),
                   max_no_speech_prob=float(stage.get("max_no_speech_prob", d.max_no_speech_prob)))


def words(text: str) -> list[str]:
    """The words of a transcript that could take the turn: annotations, fillers and backchannels removed."""
    found = _WORD.findall(_ANNOTATION.sub(" ", text.lower()))
    return [w for w in found if w not in BACKCHANNELS and not _HUM.fullmatch(w)]


def takes_the_turn(transcript: Transcript, max_no_speech_prob: float) -> bool:
    """Does this transcript of the caller's sound mean they are really talking?"""
    if transcript.no_speech_prob is not None and transcript.no_speech_prob >= max_no_speech_prob:
        return False
    return bool(words(transcript.text))


class Verdict(enum.Enum):
    CHECKING = "checking"    # the reply is paused, the sound is being checked
    WATCHING = "watching"    # no words within resume_after_ms: the reply plays again, checks go on
    CONFIRMED = "confirmed"  # words: the caller takes the turn
    DISMISSED = "dismissed"  # the sound ended without words


class InterruptionCheck:
    """One suspected interruption, from its first speech window to a verdict (sans-I/O: windows in, what to
    do out)."""

    def __init__(self, options: InterruptionOptions, *, first_window: int, onset_window: int) -> None:
        """``first_window``: where the turn's audio starts (with prefix padding); ``onset_window``: the first
        speech window."""
        self.options = options
        self.first_window, self.onset_window = first_window, onset_window
        self.verdict = Verdict.CHECKING
        self._next_check = onset_window + max(1, round(options.check_after_ms / WINDOW_MS))
        self.checked_to = -1  # the last window a finished check covered
        #: The reply was resumed at the timeout (it plays on while the sound is still watched).
        self.resumed = False

    @property
    def open(self) -> bool:
        return self.verdict in (Verdict.CHECKING, Verdict.WATCHING)

    def due(self, end_window: int, *, paused: bool = False) -> bool:
        """Should a check of the sound up to ``end_window`` start now? (``paused``: the caller's first pause,
        which always deserves one.)"""
        return self.open and (end_window >= self._next_check or (paused and end_window > self.checked_to))

    def started(self, end_window: int) -> None:
        self._next_check = end_window + max(1, round(self.options.recheck_ms / WINDOW_MS))

    def result(self, transcript: Transcript, end_window: int) -> Verdict:
        """A check of the sound up to ``end_window`` finished."""
        self.checked_to = max(self.checked_to, end_window)
        if self.open and takes_the_turn(transcript, self.options.max_no_speech_prob):
            self.verdict = Verdict.CONFIRMED
        return self.verdict

    def timed_out(self, end_window: int) -> bool:
        """True once, when ``resume_after_ms`` of sound has passed without words: resume the reply."""
        if self.verdict is Verdict.CHECKING and \
                (end_window - self.onset_window) * WINDOW_MS >= self.options.resume_after_ms:
            self.verdict = Verdict.WATCHING
            self.resumed = True
            return True
        return False

    def ended(self, last_window: int) -> bool | None:
        """The sound stopped at ``last_window``: True if every check said no words and the last covered it
        (dismissed); None if a check of its end is still needed."""
        if not self.open:
            return False
        if self.checked_to < last_window:
            return None
        self.verdict = Verdict.DISMISSED
        return True
