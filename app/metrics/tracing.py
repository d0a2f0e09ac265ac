"""Per-turn OpenTelemetry traces: one trace per finished turn, built from its timeline after its final report.

Off unless ``SUB250_TRACES=otlp``: then :func:`configure` (once, at startup) makes this module's own
``TracerProvider`` (never OpenTelemetry's global one, which can be set only once per process) with a resource
naming the service (``service.name=sub250``, ``service.instance.id=<replica>``, ``sub250.profile``), and an
OTLP exporter behind a ``BatchSpanProcessor``: spans are queued here and sent by the processor's own thread,
never on the event loop's path. The exporter reads the standard ``OTEL_EXPORTER_OTLP_*`` variables itself
(endpoint, headers, timeout); ``OTEL_EXPORTER_OTLP_[TRACES_]PROTOCOL`` picks ``http/protobuf`` (the default)
or ``grpc``. :func:`shutdown` flushes what is queued when ``serve`` stops.

The trace of a turn (an observer, like ``prometheus.observe``): a root span ``turn`` from the turn's first mark
to its last, carrying the turn's figures as attributes, and one child span per stage whose value is a
difference of marks (``TurnTimeline.intervals``: the definitions of docs/LATENCY.md, not repeated here).
Figures measured without marks (``network_rtt``, ``gateway``, ``retrieval_ahead``, ``asr_wait``...) are
attributes of the root. Marks are ``perf_counter_ns`` values; they become epoch ns with one offset, taken when
tracing is configured. Making a turn's spans costs ~0.4 ms of the event loop, once, after its final report.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from typing import TYPE_CHECKING, Any

from sub250.errors import ConfigError
from sub250.metrics.timeline import CEILINGS, NOT_MS, TurnTimeline

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SpanExporter

    from sub250.config import Settings

log = logging.getLogger(__name__)

MODES = ("off", "otlp")
PROTOCOLS = ("http/protobuf", "grpc")
#: The root span's name; its children are named after the stage (``asr_finalize``, ``ttft``...).
ROOT = "turn"
#: Prefix of the attributes of a turn (``session.id`` is OpenTelemetry's own name).
PREFIX = "sub250.turn."

#: How long :func:`shutdown` waits for the spans still queued to be sent (s).
FLUSH_S = 5.0

_provider: TracerProvider | None = None
_tracer: Any = None
_exporter: SpanExporter | None = None
#: epoch ns - perf_counter ns, taken once (when tracing is configured).
_offset_ns = 0


def enabled() -> bool:
    return _provider is not None


def epoch_ns(perf_ns: int) -> int:
    """A ``perf_counter_ns`` mark on the wall clock (ns since the epoch), as the spans carry it."""
    return perf_ns + _offset_ns


def configure(settings: Settings, *, exporter: SpanExporter | None = None, synchronous: bool = False) -> bool:
    """Start tracing when ``settings.traces`` is ``otlp``; True if it is on. ``exporter``: where the spans go
    instead of OTLP; ``synchronous``: each exported as it ends, not in batches by a thread (tests)."""
    global _provider, _tracer, _exporter, _offset_ns
    mode = settings.traces.strip().lower()
    if mode not in MODES:
        raise ConfigError(f"SUB250_TRACES={settings.traces!r} is not a trace mode",
                          f"set SUB250_TRACES to one of {', '.join(MODES)}, or unset it for off")
    if mode == "off":
        return False
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor

    exporter = exporter or _otlp_exporter()
    shutdown()  # a second configuration replaces the first
    provider = TracerProvider(resource=Resource.create({
        "service.name": "sub250", "service.instance.id": settings.replica_name, "sub250.profile": settings.profile}))
    provider.add_span_processor(SimpleSpanProcessor(exporter) if synchronous else BatchSpanProcessor(exporter))
    _offset_ns = time.time_ns() - time.perf_counter_ns()
    _provider, _tracer, _exporter = provider, provider.get_tracer("sub250"), exporter
    return True


def _otlp_exporter() -> Any:
    variable = next((v for v in ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL")
                     if os.environ.get(v)), None)
    protocol = os.environ[variable].strip() if variable else "http/protobuf"
    if protocol == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
    elif protocol == "http/protobuf":
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter  # type: ignore[assignment]
    else:
        raise ConfigError(f"{variable}={protocol!r} is not an OTLP protocol sub250 can export with",
                          f"set {variable} to one of {', '.join(PROTOCOLS)}")
    return OTLPSpanExporter()  # endpoint, headers, timeout: from OTEL_EXPORTER_OTLP_[TRACES_]*


def shutdown(timeout_s: float = FLUSH_S) -> None:
    """Send the spans still queued and stop exporting (``serve`` stopping); tracing is then off. Bounded: after
    ``timeout_s`` the exporter is stopped (a collector that is down would hold it in retries for
    ``OTEL_EXPORTER_OTLP_TIMEOUT``, 10 s, per batch) and what is left is dropped."""
    global _provider, _tracer, _exporter
    provider, exporter = _provider, _exporter
    _provider = _tracer = _exporter = None
    if provider is None:
        return
    assert exporter is not None  # configure() sets both
    deadline = threading.Timer(timeout_s, exporter.shutdown)
    deadline.daemon = True
    deadline.start()
    try:
        provider.shutdown()  # the batch processor's thread exports what is queued, then the exporter stops
    finally:
        deadline.cancel()


def observe(tl: TurnTimeline, session_id: str = "") -> None:
    """The trace of one finished turn (nothing when tracing is off). A failure is logged, never raised: a
    trace must not cost a turn."""
    if _tracer is None or not tl.marks:
        return
    try:
        _trace(tl, session_id)
    except Exception:
        log.warning("turn %s: its trace could not be made", tl.turn_id, exc_info=True)


def _trace(tl: TurnTimeline, session_id: str) -> None:
    from opentelemetry import trace
    from opentelemetry.context import Context
    from opentelemetry.trace import Status, StatusCode

    meets, over = tl.verdict()
    root = _tracer.start_span(ROOT, context=Context(), start_time=epoch_ns(min(tl.marks.values())),
                              attributes=_attributes(tl, session_id, meets, over))
    if tl.outcome == "failed":
        root.set_status(Status(StatusCode.ERROR, "the reply failed"))
    parent = trace.set_span_in_context(root)
    for name, (start, end) in sorted(tl.intervals().items(), key=lambda kv: kv[1]):
        attributes: dict[str, Any] = {"sub250.span.over_budget": name in over}
        if name in CEILINGS:
            attributes["sub250.span.ceiling_ms"] = CEILINGS[name]
        child = _tracer.start_span(name, context=parent, start_time=epoch_ns(start), attributes=attributes)
        child.end(end_time=epoch_ns(end))
    root.end(end_time=epoch_ns(max(tl.marks.values())))


def _attributes(tl: TurnTimeline, session_id: str, meets: bool | None, over: list[str]) -> dict[str, Any]:
    a: dict[str, Any] = {PREFIX + "id": tl.turn_id, PREFIX + "outcome": tl.outcome, PREFIX + "over_budget": over,
                         PREFIX + "tokens": tl.tokens, PREFIX + "speculative": tl.speculative}
    if session_id:
        a["session.id"] = session_id
    if meets is not None:
        a[PREFIX + "meets_budget"] = meets
    for name, value in tl.spans().items():
        if value is not None:
            a[PREFIX + (name if name in NOT_MS else name + "_ms")] = round(value, 3)
    for name, value in tl.ahead.items():
        a[f"{PREFIX}ahead.{name}_ms"] = round(value, 3)
    if tl.retrieval_cache is not None:
        a[PREFIX + "retrieval_cache"] = tl.retrieval_cache
    if tl.answer and tl.answer.get("path"):
        a[PREFIX + "answer_path"] = str(tl.answer["path"])
    if tl.prompt_tokens is not None:
        a[PREFIX + "prompt_tokens"] = tl.prompt_tokens
    if tl.cached_prompt_tokens is not None:
        a[PREFIX + "cached_prompt_tokens"] = tl.cached_prompt_tokens
    return a
