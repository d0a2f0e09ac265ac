"""What the profile tunes in a session's pipeline, read once into typed fields with documented defaults.

Everything a profile says about a stage's *model* stays with that stage's engine; this is the part the
session itself acts on (when to speculate, partials, prompt budgets, the first TTS chunk).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sub250.answer.policy import AnswerPolicy
from sub250.errors import ConfigError
from sub250.profiles import Profile
from sub250.rag.about import About
from sub250.session.interruption import InterruptionOptions
from sub250.tools.policy import ToolPolicy
from sub250.turn_model import words_reader


@dataclass(frozen=True)
class PipelineTuning:
    #: The model name sessions report unless the client asked for one (``[llm] served_name``).
    served_name: str = "sub250"
    #: Silence after speech that starts the speculative reply (``[vad] speculate_after_ms``); 0: no speculation.
    speculate_after_ms: int = 64
    #: Silence that ends a pause whose words so far end open ("...from the", "...and"; app/session/turn_cue.py)
    #: instead of the turn detection's own (``[vad] hold_open_ms``); 0: off. The words are those of the reply
    #: held at the pause (a pause whose words are still being transcribed waits for them, at most as long);
    #: with ``semantic_vad`` they also veto the end-of-turn model's "complete" (the cap still ends the pause).
    hold_open_ms: int = 0
    #: ``server_vad``: silence that ends a pause whose words the LLM reads as a finished turn (``[vad]
    #: finished_commit_ms``; app/session/turn_words.py), sooner than ``silence_duration_ms``; 0: off. With it on,
    #: words the LLM reads as unfinished are held (``unfinished_hold_ms``); a reading not known by
    #: ``silence_duration_ms`` holds the pause until it is, at most ``unfinished_hold_ms`` (then it is stopped
    #: and the pause goes by silence and open words).
    finished_commit_ms: int = 0
    #: The LLM's log P(the caller's message ends here) at which the words count as finished (``[vad]
    #: finished_logprob``).
    finished_logprob: float = -4.0
    #: Silence that ends a pause whose words the LLM reads as unfinished but that do not end open (``[vad]
    #: unfinished_hold_ms``); 0: ``hold_open_ms``, as open words.
    unfinished_hold_ms: int = 0
    #: Partial transcripts while the caller speaks (``[asr] partials``), and the window they use.
    partials: bool = True
    partial_window: str = "audio"
    #: Token budgets of one prompt (``[llm] context_tokens`` / ``history_tokens``).
    context_tokens: int = 350
    history_tokens: int = 384
    #: The first TTS chunk is the first clause or six words (``[tts] first_clause``).
    first_clause: bool = True
    #: A session's instructions until the client sets its own (the knowledge base's company: app/rag/about.py).
    instructions: str = About().instructions
    #: How questions are answered (``[answer]``: app/answer/policy.py).
    answer: AnswerPolicy = field(default_factory=AnswerPolicy)
    #: How tool calls are decided (``[tools]``: app/tools/policy.py).
    tools: ToolPolicy = field(default_factory=ToolPolicy)
    #: Speech over a live reply: checked for words before it cancels the reply (``[interruption]``).
    interruption: InterruptionOptions = field(default_factory=InterruptionOptions)

    @classmethod
    def from_profile(cls, profile: Profile, about: About | None = None) -> PipelineTuning:
        """``about``: what the knowledge base says of itself (the default instructions, the decline, the idle
        nudge); None: texts that name no company."""
        vad, asr, llm, tts = (profile.stage(s) for s in ("vad", "asr", "llm", "tts"))
        d = cls()
        words_reader(profile)  # a profile sessions are tuned by names a reader that exists (the stack loads it)
        return cls(
            instructions=(about or About()).instructions,
            served_name=str(llm.get("served_name", d.served_name)),
            speculate_after_ms=int(vad.get("speculate_after_ms", d.speculate_after_ms)),
            hold_open_ms=_hold_open_ms(vad.get("hold_open_ms", d.hold_open_ms)),
            finished_commit_ms=_finished_commit_ms(vad.get("finished_commit_ms", d.finished_commit_ms)),
            finished_logprob=_finished_logprob(vad.get("finished_logprob", d.finished_logprob)),
            unfinished_hold_ms=_ms("unfinished_hold_ms", vad.get("unfinished_hold_ms", d.unfinished_hold_ms),
                                   "0 holds them as long as open words (hold_open_ms); 700 ends such a pause "
                                   "after 700 ms of silence"),
            partials=bool(asr.get("partials", d.partials)),
            partial_window=str(asr.get("partial_window", d.partial_window)),
            context_tokens=int(llm.get("context_tokens", d.context_tokens)),
            history_tokens=int(llm.get("history_tokens", d.history_tokens)),
            first_clause=bool(tts.get("first_clause", d.first_clause)),
            answer=AnswerPolicy.from_stage(profile.stage("answer"), about),
            tools=ToolPolicy.from_stage(profile.stage("tools")),
            interruption=InterruptionOptions.from_stage(profile.stage("interruption")),
        )


#: ``[vad] hold_open_ms`` at most (a minute of silence is no pause).
MAX_HOLD_OPEN_MS = 60_000


def _hold_open_ms(value: object) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= MAX_HOLD_OPEN_MS:
        raise ConfigError(f"[vad] hold_open_ms = {value!r} is not a whole number of ms from 0 to {MAX_HOLD_OPEN_MS}",
                          "0 commits every pause at the turn detection's own silence; 1500 holds a pause whose "
                          "words end open (\"...from the\") until 1.5 s of silence")
    return value


def _finished_commit_ms(value: object) -> int:
    return _ms("finished_commit_ms", value, "0 leaves every pause to the turn detection's own silence; 200 commits "
               "a pause whose words the LLM reads as a finished turn after 200 ms of silence")


def _ms(key: str, value: object, hint: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= MAX_HOLD_OPEN_MS:
        raise ConfigError(f"[vad] {key} = {value!r} is not a whole number of ms from 0 to {MAX_HOLD_OPEN_MS}", hint)
    return value


def _finished_logprob(value: object) -> float:
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not -100 <= value <= 0:
        raise ConfigError(f"[vad] finished_logprob = {value!r} is not a log-probability from -100 to 0",
                          "set it to a number such as -4.0 (scripts/bench_endpointing.py --words measures them)")
    return float(value)
