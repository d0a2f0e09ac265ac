"""False interruptions: a cough, a click or an "mm-hm" while the reply plays must not end it.

When the caller's speech starts over a live reply, the reply is **paused** at once (no new audio or text
leaves; on WebRTC the server's track stops playing) and nothing is said to the client yet. The caller's sound
is then transcribed with the fast window, first after ``check_after_ms`` of it, again as more comes (every
``recheck_ms``, or once ``recheck_unsure_ms`` after words first heard without confidence) and at its first
pause:

* **words** (anything but a filler or a backchannel, Whisper's no-speech probability below
  ``max_no_speech_prob``, and heard with confidence: see below) *confirm* it: only now does the client get
  ``input_audio_buffer.speech_started`` (with the true ``audio_start_ms``), the reply is cancelled
  (``turn_detected``) and the turn goes on as any;
* no words by the end of the sound *dismiss* it: the reply resumes where it stopped, the sound is dropped (no
  item, no event: for the client nothing happened), and the session counts a false interruption. After
  ``resume_after_ms`` without words the reply resumes even while the sound goes on (a TV, music); words
  that still come then confirm it late.

A standard client that stops its playback at ``speech_started`` therefore never stops for a cough.

The confidence: Whisper turns a hummed "mm-hmm" or "uh-huh" into words as often as not ("in a month.", "I
have..."), with a speech-like no-speech probability, but it is guessing: the decoded tokens' mean
log-probability is low. A check's words count only when ``avg_logprob - no_speech_prob`` is at least
``min_confidence`` -- or when one of them is a word a caller says to take the turn (:data:`TURN_WORDS`: "stop",
"wait", "no"...), which a short, clipped rendering may say with little confidence. Measured offline on Whisper
base (the default), over six Piper renderings each of nine backchannels and nine short interruptions, checked
at the check points (scripts/probe_backchannels.py): 26 of 54 backchannel renderings took the turn without the
test, 13 with it ("Sure." heard as "chair", "I see." as "Ice ice": sure of a wrong word); all 54 interruption
renderings still did, at the first check (docs/BENCHMARKS.md §32, with the live trials).
:class:`InterruptionCheck` is the sans-I/O part (when to check, what a transcript means); the session runs
the transcriptions and acts on its verdicts.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass
from typing import Any

from sub250.asr.base import Transcript
from sub250.audio.endpointing import WINDOW_MS, ms_to_windows
from sub250.errors import ConfigError

#: Sounds and words that do not take the turn while the assistant speaks (lower case, punctuation stripped).
BACKCHANNELS = frozenset({
    "mm", "mmm", "hm", "hmm", "hmmm", "mhm", "mm-hmm", "mm-hm", "mmhmm", "uh-huh", "uhhuh", "uh", "um", "umm",
    "uhm", "er", "erm", "ah", "ahh", "oh", "ohh", "ooh", "ow", "aha", "huh", "yeah", "yep", "yup", "yes", "ok",
    "okay", "right", "sure", "alright", "cool", "nice", "wow", "i", "see"})
#: How Whisper spells a hum it does not know ("M.", "MMA", "Ememam.", "Inemam."): m's alone, two or more m's each
#: perhaps after an e or an a (and a final a, perhaps all after "in"), or h's and m's alone. Real words ("me",
#: "am", "he", "ma'am") do not match.
_HUM = re.compile(r"m+|(?:in)?(?:[ea]?m){2,}a?|m+h+m*|h+m+")
#: Whisper's annotations of non-speech: "(coughs)", "[MUSIC]", "*sigh*", "♪".
_ANNOTATION = re.compile(r"\([^)]*\)|\[[^\]]*\]|\*[^*]*\*|♪")
_WORD = re.compile(r"[a-z0-9]+(?:['-][a-z0-9]+)*")
#: Words that take the turn however unsure the model was of them (a caller cutting in says these).
TURN_WORDS = frozenset({"stop", "wait", "no", "hold", "hang", "pause", "cancel", "sorry", "excuse", "what",
                        "hey"})


def _is_number(value: object) -> bool:
    """An int or a float from the profile (TOML's true / false are not numbers here)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


@dataclass(frozen=True)
class InterruptionOptions:
    """``[interruption]`` in the profile."""

    #: Check speech over a live reply for words before cancelling it; False: any speech cancels at once.
    enabled: bool = True
    #: The first check, after this much of the caller's sound (ms from its first speech window).
    check_after_ms: int = 224
    #: Later checks while the sound goes on, each after this much more of it.
    recheck_ms: int = 192
    #: ... but only this much more after the first check that heard words without the confidence to take them
    #: ("Wei" for the first 256 ms of "Wait"): the next rendering of a real word usually is sure of it.
    recheck_unsure_ms: int = 96
    #: Resume the paused reply after this long without words, even if the sound goes on.
    resume_after_ms: int = 1500
    #: A transcript counts only below this no-speech probability (Whisper invents words on noise).
    max_no_speech_prob: float = 0.5
    #: ... and only when ``avg_logprob - no_speech_prob`` is at least this (unless it holds one of TURN_WORDS;
    #: engines that report no log-probability skip this test). None: no confidence test.
    min_confidence: float | None = -1.3
    #: While the reply is paused for a check, its speech synthesis starts nothing new (the chunk in synthesis
    #: finishes; text keeps queueing), so the check does not share the cores with it; False: it goes on.
    hold_speech: bool = True

    def __post_init__(self) -> None:
        for name in ("enabled", "hold_speech"):
            if not isinstance(getattr(self, name), bool):
                raise ConfigError(f"[interruption] {name} = {getattr(self, name)!r} is not true or false",
                                  f"set {name} = true or {name} = false")
        for name in ("check_after_ms", "recheck_ms", "recheck_unsure_ms", "resume_after_ms"):
            value = getattr(self, name)
            if not (_is_number(value) and isinstance(value, int) and value >= 1):
                raise ConfigError(f"[interruption] {name} = {value!r} is not a positive whole number of ms",
                                  f"set {name} to an integer >= 1")
        if not (_is_number(self.max_no_speech_prob) and 0 < self.max_no_speech_prob <= 1):
            raise ConfigError(f"[interruption] max_no_speech_prob = {self.max_no_speech_prob!r} is not in (0, 1]",
                              "set it to a probability, e.g. 0.5")
        if self.min_confidence is not None and not (_is_number(self.min_confidence)
                                                    and -20 <= self.min_confidence <= 0):
            raise ConfigError(f"[interruption] min_confidence = {self.min_confidence!r} is not in [-20, 0]",
                              "set it to a log-probability such as -1.3, or \"off\"")

    @classmethod
    def from_stage(cls, stage: dict[str, Any]) -> InterruptionOptions:
        d = cls()
        confidence = stage.get("min_confidence", d.min_confidence)
        return cls(enabled=stage.get("enabled", d.enabled),
                   hold_speech=stage.get("hold_speech", d.hold_speech),
                   check_after_ms=stage.get("check_after_ms", d.check_after_ms),
                   recheck_ms=stage.get("recheck_ms", d.recheck_ms),
                   recheck_unsure_ms=stage.get("recheck_unsure_ms", d.recheck_unsure_ms),
                   resume_after_ms=stage.get("resume_after_ms", d.resume_after_ms),
                   max_no_speech_prob=stage.get("max_no_speech_prob", d.max_no_speech_prob),
                   min_confidence=None if confidence == "off" else confidence)


def words(text: str) -> list[str]:
    """The words of a transcript that could take the turn: annotations, fillers and backchannels removed."""
    found = _WORD.findall(_ANNOTATION.sub(" ", text.lower()))
    return [w for w in found if w not in BACKCHANNELS and not _HUM.fullmatch(w)]


class Heard(enum.Enum):
    """What one check's transcript says of the caller's sound."""

    NOTHING = "nothing"  # no words: silence, a hum, a backchannel, or words on what Whisper calls no speech
    UNSURE = "unsure"    # words, but heard without the confidence to take the turn
    WORDS = "words"      # words that take the turn


def hear(transcript: Transcript, options: InterruptionOptions) -> Heard:
    """What this transcript of the caller's sound means."""
    no_speech = transcript.no_speech_prob
    if no_speech is not None and no_speech >= options.max_no_speech_prob:
        return Heard.NOTHING
    said = words(transcript.text)
    if not said:
        return Heard.NOTHING
    if options.min_confidence is None or transcript.avg_logprob is None or TURN_WORDS.intersection(said):
        return Heard.WORDS
    sure = transcript.avg_logprob - (no_speech or 0.0) >= options.min_confidence
    return Heard.WORDS if sure else Heard.UNSURE


def takes_the_turn(transcript: Transcript, options: InterruptionOptions) -> bool:
    """Does this transcript of the caller's sound mean they are really talking?"""
    return hear(transcript, options) is Heard.WORDS


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
        self._next_check = onset_window + ms_to_windows(options.check_after_ms)
        self.checked_to = -1  # the last window a finished check covered
        #: The reply was resumed at the timeout (it plays on while the sound is still watched).
        self.resumed = False
        self._rechecked_unsure = False  # the one sooner recheck after unsure words was given

    @property
    def open(self) -> bool:
        return self.verdict in (Verdict.CHECKING, Verdict.WATCHING)

    def due(self, end_window: int, *, paused: bool = False) -> bool:
        """Should a check of the sound up to ``end_window`` start now? (``paused``: the caller's first pause,
        which always deserves one.)"""
        return self.open and (end_window >= self._next_check or (paused and end_window > self.checked_to))

    def started(self, end_window: int) -> None:
        self._next_check = end_window + ms_to_windows(self.options.recheck_ms)

    def result(self, transcript: Transcript, end_window: int) -> Verdict:
        """A check of the sound up to ``end_window`` finished (words heard unsure bring the next one sooner)."""
        self.checked_to = max(self.checked_to, end_window)
        if self.open:
            heard = hear(transcript, self.options)
            if heard is Heard.WORDS:
                self.verdict = Verdict.CONFIRMED
            elif heard is Heard.UNSURE and not self._rechecked_unsure:
                # once: a hum rendered as unsure words each time ("In a man.", "In a map.", ...) would otherwise
                # be checked twice as often, with twice the chances of one rendering sure enough to confirm it
                self._rechecked_unsure = True
                self._next_check = min(self._next_check, end_window + ms_to_windows(self.options.recheck_unsure_ms))
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
