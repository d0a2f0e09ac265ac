"""The turn timeline of docs/LATENCY.md: monotonic marks, the budget's spans, and the verdict.

One clock for the whole process: ``time.perf_counter_ns()``. A mark is taken at the moment it names
(``mark()`` is called right there, not when something is logged). Spans whose marks are missing are
``None`` (a text turn has no speech marks; a text-only reply has no audio).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

MARKS = (
    "speech_start",
    "speech_end",
    "turn_commit",
    "asr_final",
    "retrieval_start",
    "retrieval_end",
    "prompt_ready",
    "llm_submit",
    "first_token",
    "first_token_sent",
    "first_audio",
    "first_audio_sent",
    "response_done",
)

BUDGET_MS = 250.0
#: Ceiling of each budget span (ms); ``ttft``'s ceiling is ``250 - network_rtt``.
CEILINGS = {
    "network_rtt": 50.0,
    "gateway": 15.0,
    "asr_finalize": 30.0,
    "retrieval": 40.0,
    "prompt": 20.0,
    "prefill": 120.0,
}
SPANS = ("network_rtt", "gateway", "asr_finalize", "retrieval", "prompt", "prefill", "ttft", "ttft_client")
BESIDE = ("endpoint_delay", "voice_to_voice", "tts_first_audio", "tokens_per_s", "spec_acceptance", "retrieval_ahead",
          "tool_choice", "tool", "asr_wait", "asr_compute", "tts_wait", "extract", "llm_choice")
#: The spans (of SPANS and BESIDE) that are one mark's difference to another: name -> (from, to). ``prompt`` is one
#: too, from the later of two marks (see ``TurnTimeline.intervals``); the others are measured, or not durations.
MARK_SPANS = {
    "asr_finalize": ("turn_commit", "asr_final"),
    "retrieval": ("retrieval_start", "retrieval_end"),
    "prefill": ("llm_submit", "first_token"),
    "ttft": ("turn_commit", "first_token_sent"),
    "endpoint_delay": ("speech_end", "turn_commit"),
    "voice_to_voice": ("speech_end", "first_audio_sent"),
    "tts_first_audio": ("first_token", "first_audio"),
}
#: Figures of SPANS and BESIDE that are not milliseconds.
NOT_MS = ("tokens_per_s", "spec_acceptance")


def now_ns() -> int:
    return time.perf_counter_ns()


@dataclass
class TurnTimeline:
    turn_id: str
    marks: dict[str, int] = field(default_factory=dict)
    #: Measured durations that are not differences of marks (ms): network_rtt, gateway, retrieval_ahead.
    measured: dict[str, float] = field(default_factory=dict)
    tokens: int = 0
    spec: dict[str, Any] | None = None
    outcome: str = "in_progress"  # completed | cancelled | failed
    #: The reply was prepared speculatively at the first pause and adopted at the commit; ``ahead``: ms of
    #: work done before the commit (asr, retrieval, prompt), off the critical path.
    speculative: bool = False
    ahead: dict[str, float] = field(default_factory=dict)
    #: How the query cache served this turn's retrieval: exact | near | miss | off (None: no retrieval).
    retrieval_cache: str | None = None
    #: How the question was answered (app/answer): ``path`` declined | extractive | generative, the
    #: profile's ``mode``, ``top_score`` (cosine to the best passage).
    answer: dict[str, Any] | None = None
    #: Tool calling (app/tools): what the decision did (``selector``, ``called``, ``best``, ``score``, ``ms``),
    #: or, for an answer after tools ran, their ``results`` (name, call_id, ms at the client).
    tool: dict[str, Any] | None = None
    #: The prompt's length in tokens and how many of them vLLM's prefix cache already held.
    prompt_tokens: int | None = None
    cached_prompt_tokens: int | None = None

    def unmark(self, name: str) -> None:
        self.marks.pop(name, None)

    def rebase_to_commit(self, commit_ns: int, started_ns: int) -> None:
        """A reply prepared before the commit (speculative end of turn) is adopted at ``commit_ns``: work it did
        earlier is off the critical path, so it is reported apart (``ahead``, ``retrieval_ahead``) and its marks
        move to the commit — never a negative span. ``started_ns``: when the speculative work began."""
        self.speculative = True
        marks = self.marks
        if "asr_final" in marks and marks["asr_final"] < commit_ns:
            self.ahead["asr"] = (marks["asr_final"] - started_ns) / 1e6
            self.mark("asr_final", commit_ns, overwrite=True)
        if "retrieval_start" in marks and marks["retrieval_start"] < commit_ns:
            end = marks.get("retrieval_end")
            if end is not None and end <= commit_ns:
                self.measured["retrieval_ahead"] = (end - marks["retrieval_start"]) / 1e6
                self.unmark("retrieval_start")
                self.unmark("retrieval_end")
            else:
                self.measured["retrieval_ahead"] = (commit_ns - marks["retrieval_start"]) / 1e6
                self.mark("retrieval_start", commit_ns, overwrite=True)
        if "prompt_ready" in marks and marks["prompt_ready"] < commit_ns:
            self.ahead["prompt_ready"] = (marks["prompt_ready"] - started_ns) / 1e6
            self.mark("prompt_ready", commit_ns, overwrite=True)

    def mark(self, name: str, at_ns: int | None = None, *, overwrite: bool = False) -> int:
        if name not in MARKS:
            raise KeyError(f"unknown mark {name!r}")
        if overwrite or name not in self.marks:
            self.marks[name] = now_ns() if at_ns is None else at_ns
        return self.marks[name]

    def has(self, name: str) -> bool:
        return name in self.marks

    def _ms(self, a: str, b: str) -> float | None:
        if a in self.marks and b in self.marks:
            return (self.marks[b] - self.marks[a]) / 1e6
        return None

    def intervals(self) -> dict[str, tuple[int, int]]:
        """The spans that are differences of marks (``MARK_SPANS`` and ``prompt``), as (start, end) in ns, for
        those whose marks exist: what :meth:`spans` measures, and what a trace draws."""
        m = self.marks
        out = {name: (m[a], m[b]) for name, (a, b) in MARK_SPANS.items() if a in m and b in m}
        if "prompt_ready" in m and ("asr_final" in m or "retrieval_end" in m):
            out["prompt"] = (max(m.get("asr_final", 0), m.get("retrieval_end", 0)), m["prompt_ready"])
        return out

    def spans(self) -> dict[str, float | None]:
        s: dict[str, float | None] = {k: None for k in SPANS + BESIDE}
        s["network_rtt"] = self.measured.get("network_rtt")
        s["gateway"] = self.measured.get("gateway")
        for name, (start, end) in self.intervals().items():
            s[name] = (end - start) / 1e6
        if s["ttft"] is not None and s["network_rtt"] is not None:
            s["ttft_client"] = s["ttft"] + s["network_rtt"]
        gen = self._ms("first_token", "response_done")
        if gen and self.tokens > 1:
            s["tokens_per_s"] = (self.tokens - 1) / (gen / 1000.0)
        if self.spec and self.spec.get("num_draft_tokens"):
            s["spec_acceptance"] = self.spec["num_accepted_draft_tokens"] / self.spec["num_draft_tokens"]
        s["retrieval_ahead"] = self.measured.get("retrieval_ahead")
        s["tool_choice"] = self.measured.get("tool_choice")
        s["tool"] = self.measured.get("tool")
        s["asr_wait"] = self.measured.get("asr_wait")
        s["asr_compute"] = self.measured.get("asr_compute")
        s["tts_wait"] = self.measured.get("tts_wait")
        # the choice mode's two paths: the grounded candidates ready (what an extractive answer would wait for),
        # and the model's tokens deciding among them (from its request)
        s["extract"] = self.measured.get("extract")
        s["llm_choice"] = self.measured.get("llm_choice")
        return s

    def verdict(self) -> tuple[bool | None, list[str]]:
        """(meets the 250 ms budget, the stages over their ceilings). ``None`` until ttft is known."""
        s = self.spans()
        over = [k for k, ceiling in CEILINGS.items() if (v := s.get(k)) is not None and v > ceiling]
        ttft_ceiling = BUDGET_MS - (s["network_rtt"] or 0.0)
        if s["ttft"] is not None and s["ttft"] > ttft_ceiling:
            over.append("ttft")
        total = s["ttft_client"] if s["ttft_client"] is not None else s["ttft"]
        meets = None if total is None else total <= BUDGET_MS
        return meets, over

    def report(self, final: bool) -> dict[str, Any]:
        """The body of the ``sub250.turn.latency`` event (marks relative to the first mark, in ms)."""
        origin = min(self.marks.values()) if self.marks else 0
        meets, over = self.verdict()
        spans = self.spans()
        return {
            "turn_id": self.turn_id,
            "final": final,
            "outcome": self.outcome,
            "clock": "server perf_counter, ms since the turn's first mark",
            "origin_ns": origin,
            "marks": {k: round((v - origin) / 1e6, 3) for k, v in sorted(self.marks.items(), key=lambda kv: kv[1])},
            "spans": {k: (None if v is None else round(v, 3)) for k, v in spans.items() if k in SPANS},
            "beside": {k: (None if v is None else round(v, 3)) for k, v in spans.items() if k in BESIDE},
            "budget_ms": BUDGET_MS,
            "ceilings_ms": dict(CEILINGS, ttft=BUDGET_MS - (spans["network_rtt"] or 0.0)),
            "meets_budget": meets,
            "over_budget": over,
            "tokens": self.tokens,
            "spec_decoding": self.spec,
            "speculative": self.speculative,
            "ahead_ms": {k: round(v, 3) for k, v in self.ahead.items()},
            "retrieval_cache": self.retrieval_cache,
            "answer": self.answer,
            "tool": self.tool,
            "prefix_cache": {"prompt_tokens": self.prompt_tokens, "cached_tokens": self.cached_prompt_tokens},
        }
