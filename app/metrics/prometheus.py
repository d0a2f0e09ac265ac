"""Prometheus export of turn timelines: a histogram per span, a counter of over-budget turns by stage.

An observer: the session hands it finished timelines; nothing else in the pipeline knows of it.
"""

from __future__ import annotations

from prometheus_client import Counter, Histogram

from app.metrics.timeline import BESIDE, SPANS, TurnTimeline

_BUCKETS_MS = (5, 10, 15, 20, 30, 40, 50, 75, 100, 120, 150, 200, 250, 300, 400, 500, 750, 1000, 1500, 2500, 5000)

SPAN_MS = Histogram("sub250_turn_span_ms", "Per-turn latency span (ms), as defined in LATENCY.md",
                    ["span"], buckets=_BUCKETS_MS)
TURNS = Counter("sub250_turns_total", "Turns by outcome and budget verdict", ["outcome", "meets_budget"])
OVER_BUDGET = Counter("sub250_turn_stage_over_budget_total", "Turns whose stage exceeded its ceiling", ["stage"])
SPECULATIVE = Counter("sub250_speculative_replies_total",
                      "Replies prepared at the first pause: started, adopted at the commit, discarded", ["outcome"])
QUERY_CACHE = Counter("sub250_query_cache_total",
                      "Retrievals on the critical path by query-cache result (exact, near, miss); "
                      "hit rate = (exact + near) / all", ["result"])
PREFIX_CACHE = Counter("sub250_prefix_cache_tokens_total",
                       "Prompt tokens sent to the LLM (kind=prompt) and those its prefix cache held (kind=cached); "
                       "hit rate = cached / prompt", ["kind"])
SPEC_TOKENS = Counter("sub250_spec_decode_tokens_total", "Speculative decoding draft tokens", ["kind"])


def observe(tl: TurnTimeline) -> None:
    spans = tl.spans()
    for name in SPANS + ("endpoint_delay", "voice_to_voice", "tts_first_audio", "retrieval_ahead"):
        value = spans.get(name)
        if value is not None:
            SPAN_MS.labels(span=name).observe(value)
    meets, over = tl.verdict()
    TURNS.labels(outcome=tl.outcome, meets_budget=str(meets).lower()).inc()
    for stage in over:
        OVER_BUDGET.labels(stage=stage).inc()
    if tl.retrieval_cache in ("exact", "near", "miss"):
        QUERY_CACHE.labels(result=tl.retrieval_cache).inc()
    if tl.prompt_tokens is not None and tl.cached_prompt_tokens is not None:
        PREFIX_CACHE.labels(kind="prompt").inc(tl.prompt_tokens)
        PREFIX_CACHE.labels(kind="cached").inc(tl.cached_prompt_tokens)
    if tl.spec:
        SPEC_TOKENS.labels(kind="drafted").inc(tl.spec.get("num_draft_tokens", 0))
        SPEC_TOKENS.labels(kind="accepted").inc(tl.spec.get("num_accepted_draft_tokens", 0))


__all__ = ["observe", "BESIDE"]
