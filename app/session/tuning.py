"""What the profile tunes in a session's pipeline, read once into typed fields with documented defaults.

Everything a profile says about a stage's *model* stays with that stage's engine; this is the part the
session itself acts on (when to speculate, partials, prompt budgets, the first TTS chunk).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from app.answer.policy import AnswerPolicy
from app.profiles import Profile
from app.session.interruption import InterruptionOptions
from app.tools.policy import ToolPolicy


@dataclass(frozen=True)
class PipelineTuning:
    #: The model name sessions report unless the client asked for one (``[llm] served_name``).
    served_name: str = "sub250"
    #: Silence after speech that starts the speculative reply (``[vad] speculate_after_ms``); 0: no speculation.
    speculate_after_ms: int = 64
    #: Partial transcripts while the caller speaks (``[asr] partials``), and the window they use.
    partials: bool = True
    partial_window: str = "audio"
    #: Token budgets of one prompt (``[llm] context_tokens`` / ``history_tokens``).
    context_tokens: int = 350
    history_tokens: int = 384
    #: The first TTS chunk is the first clause or six words (``[tts] first_clause``).
    first_clause: bool = True
    #: How questions are answered (``[answer]``: app/answer/policy.py).
    answer: AnswerPolicy = field(default_factory=AnswerPolicy)
    #: How tool calls are decided (``[tools]``: app/tools/policy.py).
    tools: ToolPolicy = field(default_factory=ToolPolicy)
    #: Speech over a live reply: checked for words before it cancels the reply (``[interruption]``).
    interruption: InterruptionOptions = field(default_factory=InterruptionOptions)

    @classmethod
    def from_profile(cls, profile: Profile) -> "PipelineTuning":
        vad, asr, llm, tts = (profile.stage(s) for s in ("vad", "asr", "llm", "tts"))
        d = cls()
        return cls(
            served_name=str(llm.get("served_name", d.served_name)),
            speculate_after_ms=int(vad.get("speculate_after_ms", d.speculate_after_ms)),
            partials=bool(asr.get("partials", d.partials)),
            partial_window=str(asr.get("partial_window", d.partial_window)),
            context_tokens=int(llm.get("context_tokens", d.context_tokens)),
            history_tokens=int(llm.get("history_tokens", d.history_tokens)),
            first_clause=bool(tts.get("first_clause", d.first_clause)),
            answer=AnswerPolicy.from_stage(profile.stage("answer")),
            tools=ToolPolicy.from_stage(profile.stage("tools")),
            interruption=InterruptionOptions.from_stage(profile.stage("interruption")),
        )
