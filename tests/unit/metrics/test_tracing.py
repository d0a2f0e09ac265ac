"""Per-turn traces (app/metrics/tracing.py): the spans a hand-built timeline gives, their times and attributes;
off by default; and the wiring: a session's turn reaches the tracer with the session's id."""

import threading
import time

import pytest
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from sub250.config import Settings
from sub250.errors import ConfigError
from sub250.metrics import tracing
from sub250.metrics.timeline import TurnTimeline
from tests.unit.session.fakes import feed, make_session, silence, speech, wait_until

MS = 1_000_000


class RecordingExporter(SpanExporter):
    """Records each batch and the thread that exported it; ``hang``: each export waits until shutdown."""

    def __init__(self, hang=False):
        self.batches, self.threads, self.hang = [], set(), hang
        self.stopping = threading.Event()
        self.stopped = False

    def export(self, spans):
        self.threads.add(threading.get_ident())
        if self.hang:
            self.stopping.wait(30)
        self.batches.append(list(spans))
        return SpanExportResult.SUCCESS

    def shutdown(self):
        self.stopped = True
        self.stopping.set()
T0 = 5_000 * MS  # perf_counter ns of the first mark


@pytest.fixture
def spans():
    """Tracing on, into memory (synchronously); off again after the test."""
    exporter = InMemorySpanExporter()
    assert tracing.configure(Settings(traces="otlp", replica="replica-a", profile="cpu-tiny"),
                             exporter=exporter, synchronous=True)
    yield exporter
    tracing.shutdown()


def spoken_timeline() -> TurnTimeline:
    tl = TurnTimeline("item_42")
    for name, at in dict(speech_start=0, speech_end=1000, turn_commit=1500, asr_final=1520, retrieval_start=1520,
                         retrieval_end=1550, prompt_ready=1560, llm_submit=1561, first_token=1660,
                         first_token_sent=1662, first_audio=1900, first_audio_sent=1905, response_done=3000).items():
        tl.mark(name, T0 + at * MS)
    tl.measured.update(network_rtt=20.0, gateway=0.5, asr_wait=1.0)
    tl.tokens, tl.outcome, tl.retrieval_cache = 31, "completed", "miss"
    tl.answer = {"path": "generative", "mode": "generative"}
    return tl


def test_off_by_default_makes_no_provider_and_observing_does_nothing():
    assert Settings().traces == "off"
    assert tracing.configure(Settings()) is False
    assert not tracing.enabled() and tracing._provider is None
    tracing.observe(spoken_timeline(), "sess_1")  # no tracer: nothing happens, nothing raises
    tracing.shutdown()  # harmless when off


def test_an_unknown_mode_is_a_config_error_with_the_fix():
    with pytest.raises(ConfigError, match="SUB250_TRACES") as err:
        tracing.configure(Settings(traces="jaeger"))
    assert "off, otlp" in str(err.value)
    assert not tracing.enabled()


def test_a_turn_is_one_root_span_with_a_child_per_stage_at_its_marks(spans):
    tl = spoken_timeline()
    tracing.observe(tl, "sess_1")
    finished = spans.get_finished_spans()
    root = next(s for s in finished if s.name == "turn")
    children = [s for s in finished if s is not root]
    assert root.parent is None
    assert all(c.parent.span_id == root.context.span_id and c.context.trace_id == root.context.trace_id
               for c in children)
    # every stage that is a difference of marks, and nothing measured without marks
    assert {c.name for c in children} == {"asr_finalize", "retrieval", "prompt", "prefill", "ttft", "endpoint_delay",
                                          "voice_to_voice", "tts_first_audio"}
    m = tl.marks
    assert (root.start_time, root.end_time) == (tracing.epoch_ns(m["speech_start"]), tracing.epoch_ns(m["response_done"]))
    by_name = {c.name: c for c in children}
    for name, (start, end) in {"asr_finalize": ("turn_commit", "asr_final"), "ttft": ("turn_commit", "first_token_sent"),
                               "prefill": ("llm_submit", "first_token"),
                               "voice_to_voice": ("speech_end", "first_audio_sent"),
                               "prompt": ("retrieval_end", "prompt_ready")}.items():
        span = by_name[name]
        assert (span.start_time, span.end_time) == (tracing.epoch_ns(m[start]), tracing.epoch_ns(m[end])), name
    assert by_name["ttft"].end_time - by_name["ttft"].start_time == 162 * MS
    # one offset for every mark: on the wall clock, near now
    assert abs(tracing.epoch_ns(time.perf_counter_ns()) - time.time_ns()) < 50 * MS
    assert by_name["prefill"].attributes["sub250.span.ceiling_ms"] == 120.0
    assert by_name["prefill"].attributes["sub250.span.over_budget"] is False


def test_the_root_span_carries_the_turn_figures_and_the_resource_names_the_replica(spans):
    tracing.observe(spoken_timeline(), "sess_1")
    root = next(s for s in spans.get_finished_spans() if s.name == "turn")
    a = root.attributes
    assert a["session.id"] == "sess_1" and a["sub250.turn.id"] == "item_42"
    assert a["sub250.turn.outcome"] == "completed" and a["sub250.turn.meets_budget"] is True
    assert a["sub250.turn.ttft_ms"] == 162.0 and a["sub250.turn.ttft_client_ms"] == 182.0
    assert a["sub250.turn.voice_to_voice_ms"] == 905.0 and a["sub250.turn.speculative"] is False
    # measured without marks: attributes, not spans
    assert a["sub250.turn.network_rtt_ms"] == 20.0 and a["sub250.turn.gateway_ms"] == 0.5
    assert a["sub250.turn.asr_wait_ms"] == 1.0
    assert a["sub250.turn.tokens_per_s"] == pytest.approx(30 / 1.34, abs=1e-3)  # not ms: no suffix
    assert a["sub250.turn.tokens"] == 31 and a["sub250.turn.retrieval_cache"] == "miss"
    assert a["sub250.turn.answer_path"] == "generative" and tuple(a["sub250.turn.over_budget"]) == ()
    assert "sub250.turn.prefill_ms" in a and "sub250.turn.tool_ms" not in a  # unknown figures are left out
    r = root.resource.attributes
    assert r["service.name"] == "sub250" and r["service.instance.id"] == "replica-a"
    assert r["sub250.profile"] == "cpu-tiny"


def test_a_failed_text_turn_over_budget(spans):
    from opentelemetry.trace import StatusCode

    tl = TurnTimeline("item_7")
    for name, at in dict(turn_commit=0, asr_final=0, retrieval_start=0, retrieval_end=60, prompt_ready=61,
                         llm_submit=62, first_token=400, first_token_sent=401, response_done=500).items():
        tl.mark(name, T0 + at * MS)
    tl.outcome = "failed"
    tracing.observe(tl)
    finished = spans.get_finished_spans()
    root = next(s for s in finished if s.name == "turn")
    assert root.status.status_code is StatusCode.ERROR
    assert "session.id" not in root.attributes and root.attributes["sub250.turn.meets_budget"] is False
    assert set(root.attributes["sub250.turn.over_budget"]) == {"retrieval", "prefill", "ttft"}
    children = {s.name: s for s in finished if s is not root}
    assert set(children) == {"asr_finalize", "retrieval", "prompt", "prefill", "ttft"}  # no speech, no audio
    assert children["retrieval"].attributes["sub250.span.over_budget"] is True
    assert "sub250.span.ceiling_ms" not in children["ttft"].attributes  # its ceiling depends on network_rtt


def test_a_turn_without_marks_is_not_traced(spans):
    tracing.observe(TurnTimeline("item_0"), "sess_1")
    assert spans.get_finished_spans() == ()


def test_shutdown_flushes_and_turns_tracing_off():
    exporter = InMemorySpanExporter()
    tracing.configure(Settings(traces="otlp"), exporter=exporter, synchronous=True)
    assert tracing.enabled()
    tracing.shutdown()
    assert not tracing.enabled()
    tracing.observe(spoken_timeline(), "sess_1")
    assert exporter.get_finished_spans() == ()


def test_spans_go_out_in_batches_on_their_own_thread_and_shutdown_sends_what_is_left():
    exporter = RecordingExporter()
    tracing.configure(Settings(traces="otlp"), exporter=exporter)
    tracing.observe(spoken_timeline(), "sess_1")
    assert exporter.batches == []  # queued: nothing was exported on the caller's thread
    tracing.shutdown()
    assert sum(len(b) for b in exporter.batches) == 9 and exporter.threads != {threading.get_ident()}
    assert exporter.stopped


def test_shutdown_is_bounded_when_the_collector_does_not_answer():
    exporter = RecordingExporter(hang=True)  # as the OTLP exporter's retries against a collector that is down
    tracing.configure(Settings(traces="otlp"), exporter=exporter)
    tracing.observe(spoken_timeline(), "sess_1")
    started = time.monotonic()
    tracing.shutdown(timeout_s=0.2)
    assert time.monotonic() - started < 3 and exporter.stopped and not tracing.enabled()


def test_otlp_exporter_follows_the_standard_protocol_variable(monkeypatch):
    from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as Grpc
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as Http

    monkeypatch.delenv("OTEL_EXPORTER_OTLP_PROTOCOL", raising=False)
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", raising=False)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector.example:4318")
    http = tracing._otlp_exporter()
    assert isinstance(http, Http) and http._endpoint == "http://collector.example:4318/v1/traces"
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "grpc")
    grpc = tracing._otlp_exporter()
    assert isinstance(grpc, Grpc)
    grpc.shutdown()
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "http/json")
    with pytest.raises(ConfigError, match="(?s)OTEL_EXPORTER_OTLP_TRACES_PROTOCOL='http/json'.*http/protobuf, grpc"):
        tracing._otlp_exporter()


async def test_a_sessions_turn_is_traced_with_the_session_id(spans):
    session, t, _ = make_session(speculative=False)
    await feed(session, speech(0.8) + silence(0.8))
    await wait_until(lambda: any(e["type"] == "sub250.turn.latency" and e["final"] for e in t.sent),
                     what="the final latency report")
    await session.close()
    root = next(s for s in spans.get_finished_spans() if s.name == "turn")
    item = next(e for e in t.sent if e["type"] == "input_audio_buffer.committed")["item_id"]
    assert root.attributes["session.id"] == "sess_test" and root.attributes["sub250.turn.id"] == item
    assert {"asr_finalize", "ttft", "voice_to_voice"} <= {s.name for s in spans.get_finished_spans()}


def test_the_otlp_exporter_sends_the_turn_to_a_collector_when_serve_stops(monkeypatch):
    """A stand-in collector on this machine (OTLP/HTTP: protobuf POSTs to /v1/traces): the real exporter, batch
    processor and shutdown."""
    from http.server import BaseHTTPRequestHandler, HTTPServer

    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    received = []

    class Collector(BaseHTTPRequestHandler):
        def do_POST(self):
            body = self.rfile.read(int(self.headers["Content-Length"]))
            received.append((self.path, ExportTraceServiceRequest.FromString(body)))
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args):
            pass

    collector = HTTPServer(("127.0.0.1", 0), Collector)
    thread = threading.Thread(target=collector.serve_forever, daemon=True)
    thread.start()
    try:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", f"http://127.0.0.1:{collector.server_port}")
        monkeypatch.delenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", raising=False)
        monkeypatch.delenv("OTEL_EXPORTER_OTLP_PROTOCOL", raising=False)
        monkeypatch.delenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", raising=False)
        assert tracing.configure(Settings(traces="otlp", replica="replica-a"))
        tracing.observe(spoken_timeline(), "sess_1")
        tracing.shutdown()
    finally:
        collector.shutdown()
        collector.server_close()
    assert [path for path, _ in received] == ["/v1/traces"]
    (resource_spans,) = received[0][1].resource_spans
    resource = {a.key: a.value.string_value for a in resource_spans.resource.attributes}
    assert resource["service.name"] == "sub250" and resource["service.instance.id"] == "replica-a"
    names = [s.name for scope in resource_spans.scope_spans for s in scope.spans]
    assert sorted(names) == sorted(["turn", "asr_finalize", "retrieval", "prompt", "prefill", "ttft", "endpoint_delay",
                                    "voice_to_voice", "tts_first_audio"])
