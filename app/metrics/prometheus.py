"""Prometheus export of turn timelines: a histogram per span, a counter of over-budget turns by stage; and
the process's own gauges (sessions open, asyncio tasks, what slow clients cost).

An observer: the session hands it finished timelines, the transports count sessions and slow clients;
nothing else in the pipeline knows of it. Everything is in prometheus_client's default registry, which
also holds its ``ProcessCollector`` (``process_resident_memory_bytes``, ``process_open_fds``, CPU seconds…):
``/metrics`` serves them all (:func:`exposition`), each series labelled with this server's ``replica``.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Iterator

from prometheus_client import REGISTRY, Counter, Gauge, Histogram, generate_latest
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

from sub250.metrics.timeline import BESIDE, NOT_MS, SPANS, TurnTimeline

_BUCKETS_MS = (5, 10, 15, 20, 30, 40, 50, 75, 100, 120, 150, 200, 250, 300, 400, 500, 750, 1000, 1500, 2500, 5000)

SPAN_MS = Histogram("sub250_turn_span_ms", "Per-turn latency span (ms), as defined in LATENCY.md",
                    ["span"], buckets=_BUCKETS_MS)
TURNS = Counter("sub250_turns_total", "Turns by outcome and budget verdict", ["outcome", "meets_budget"])
OVER_BUDGET = Counter("sub250_turn_stage_over_budget_total", "Turns whose stage exceeded its ceiling", ["stage"])
SPECULATIVE = Counter("sub250_speculative_replies_total",
                      "Replies prepared at the first pause: started, adopted at the commit, discarded", ["outcome"])
END_OF_TURN_MS = Histogram("sub250_end_of_turn_ms", "semantic_vad: one call of the end-of-turn model (ms, on its "
                           "thread)", buckets=(10, 20, 30, 40, 50, 60, 80, 100, 150, 200, 400))
PAUSES_HELD_OPEN = Counter("sub250_pauses_held_open_total",
                           "Pauses whose words ended open (\"...from the\"), held past the turn detection's own "
                           "silence ([vad] hold_open_ms)")
PAUSES_FINISHED = Counter("sub250_pauses_finished_total",
                          "Pauses whose words the LLM read as a finished turn, committed at [vad] "
                          "finished_commit_ms of silence")
INTERRUPTIONS = Counter("sub250_interruptions_total",
                        "Speech over a live reply, by verdict: confirmed (words: the reply was cancelled) or "
                        "false (no words: the reply resumed)", ["verdict"])
QUERY_CACHE = Counter("sub250_query_cache_total",
                      "Retrievals on the critical path by query-cache result (exact, near, miss); "
                      "hit rate = (exact + near) / all", ["result"])
PREFIX_CACHE = Counter("sub250_prefix_cache_tokens_total",
                       "Prompt tokens sent to the LLM (kind=prompt) and those its prefix cache held (kind=cached); "
                       "hit rate = cached / prompt", ["kind"])
SPEC_TOKENS = Counter("sub250_spec_decode_tokens_total", "Speculative decoding draft tokens", ["kind"])

# --- the process ---------------------------------------------------------------------------------------

SESSIONS_OPEN = Gauge("sub250_sessions_open", "Realtime sessions open now, by transport (websocket connections, "
                      "webrtc calls, twilio streams, sip calls); the sum is every open session", ["transport"])
for _transport in ("websocket", "webrtc", "twilio", "sip"):
    SESSIONS_OPEN.labels(transport=_transport)  # every series exists (at 0) from the start
TELEPHONY_BAD_FRAMES = Counter("sub250_telephony_bad_frames_total",
                               "Frames of a phone stream that were not a message we can use (logged, dropped)")
TELEPHONY_REFUSED = Counter("sub250_telephony_refused_total",
                            "Phone webhooks and streams refused, by reason", ["reason"])
TELEPHONY_WORKER_RESTARTS = Counter("sub250_telephony_sip_worker_restarts_total",
                                    "Times the SIP worker process died and was started again (its calls ended)")
ASYNCIO_TASKS = Gauge("sub250_asyncio_tasks", "asyncio tasks alive on the event loop that serves /metrics, counted "
                      "at scrape time (NaN when scraped outside an event loop)")
OUTBOX_DROPPED_AUDIO = Counter("sub250_outbox_dropped_audio_total",
                               "Reply audio deltas dropped from a connection's outbox because its client did not "
                               "read fast enough (over the outbox limit; barge-in purges are not counted)")
SLOW_CLIENT_CLOSES = Counter("sub250_slow_client_closes_total",
                             "Connections the server closed because the client did not keep up: reason=outbox_full "
                             "(unsent events over the outbox limit with no audio left to drop; close 1008 'client is "
                             "not reading'), ping_timeout (no PONG to a keepalive ping: a client that stopped reading, "
                             "or a dead peer; close 1011)", ["reason"])
for _reason in ("outbox_full", "ping_timeout"):
    SLOW_CLIENT_CLOSES.labels(reason=_reason)


def _asyncio_tasks() -> float:
    """Tasks of the running loop. ``/metrics`` is an aiohttp handler, so a scrape runs on the server's loop;
    collected from a thread without a running loop (no server here), there is nothing to count."""
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        return float("nan")
    return float(len(asyncio.all_tasks(loop)))


ASYNCIO_TASKS.set_function(_asyncio_tasks)


def observe(tl: TurnTimeline) -> None:
    spans = tl.spans()
    for name in SPANS + BESIDE:
        if name in NOT_MS:  # not durations: not in the ms histogram
            continue
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


# --- /metrics: every series labelled with the replica ----------------------------------------------------


class ReplicaLabelled(Collector):
    """A registry's families again, each sample with ``replica="<name>"`` added: one server's series stay
    apart in a fleet without each metric declaring the label."""

    def __init__(self, replica: str, registry: Collector = REGISTRY) -> None:
        self.replica, self.registry = replica, registry

    def collect(self) -> Iterator[Metric]:
        for family in self.registry.collect():
            labelled = Metric(family.name, family.documentation, family.type, family.unit)
            labelled.samples = [s._replace(labels={**s.labels, "replica": self.replica}) for s in family.samples]
            yield labelled


def exposition(replica: str = "") -> bytes:
    """The text ``/metrics`` serves: the default registry, labelled with ``replica`` (empty: the host name)."""
    return generate_latest(ReplicaLabelled(replica or socket.gethostname()))


__all__ = ["observe", "exposition", "ReplicaLabelled", "BESIDE", "SESSIONS_OPEN", "ASYNCIO_TASKS", "OUTBOX_DROPPED_AUDIO",
           "SLOW_CLIENT_CLOSES"]
