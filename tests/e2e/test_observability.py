"""Observability of a real turn (real engines, the shared server): its trace - a ``turn`` root with a child per
stage, carrying the session's id - and the ``replica`` label on every series of /metrics."""

import asyncio
import socket
import urllib.request

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from prometheus_client.parser import text_string_to_metric_families

from sub250.config import Settings
from sub250.metrics import tracing
from sub250.sdk import RealtimeClient

pytestmark = pytest.mark.engines
TEST_KEY = "sk-sub250-test-0123456789"


@pytest.fixture
def spans():
    """Tracing on in this process, into memory; off again after the test (the provider is tracing's own)."""
    exporter = InMemorySpanExporter()
    tracing.configure(Settings(traces="otlp", replica="e2e"), exporter=exporter, synchronous=True)
    yield exporter
    tracing.shutdown()


async def test_a_spoken_turn_is_one_trace_with_its_stages_and_its_session(ws_url, server, speak, spans):
    async with RealtimeClient(ws_url, TEST_KEY) as client:
        session_id = client.session["id"]
        sender = asyncio.ensure_future(client.send_wav(str(speak("How often do I need to buy a new filter?"))))
        result = await client.collect_turn(timeout=120)
        await sender
    lat = result.latency
    assert result.status == "completed" and lat is not None and lat.final

    finished = spans.get_finished_spans()
    roots = [s for s in finished if s.name == "turn"]
    assert len(roots) == 1, [s.name for s in finished]
    root = roots[0]
    assert root.attributes["session.id"] == session_id and session_id.startswith("sess_")
    assert root.attributes["sub250.turn.id"] == lat.raw["turn_id"]
    assert root.attributes["sub250.turn.outcome"] == "completed"
    assert root.attributes["sub250.turn.meets_budget"] == lat.meets_budget
    assert root.resource.attributes["service.instance.id"] == "e2e"
    children = {s.name: s for s in finished if s.parent is not None and s.parent.span_id == root.context.span_id}
    assert set(children) == {s.name for s in finished} - {"turn"}
    assert {"asr_finalize", "prompt", "ttft", "endpoint_delay", "voice_to_voice", "tts_first_audio"} <= set(children)
    for span in children.values():
        assert root.start_time <= span.start_time <= span.end_time <= root.end_time, span.name
    # the same figures as the client's latency report
    ttft = children["ttft"]
    assert (ttft.end_time - ttft.start_time) / 1e6 == pytest.approx(lat.spans["ttft"], abs=0.01)
    assert root.attributes["sub250.turn.ttft_ms"] == pytest.approx(lat.spans["ttft"], abs=0.01)
    assert (root.end_time - root.start_time) / 1e6 == pytest.approx(max(lat.marks.values()) - min(lat.marks.values()),
                                                                     abs=0.01)

    def fetch() -> str:  # blocking: off the loop the in-process server runs on
        with urllib.request.urlopen(f"http://127.0.0.1:{server.port}/metrics", timeout=5) as resp:
            return resp.read().decode()

    samples = [s for f in text_string_to_metric_families(await asyncio.to_thread(fetch)) for s in f.samples]
    assert {s.labels.get("replica") for s in samples} == {server.replica or socket.gethostname()}
    assert any(s.name == "sub250_turn_span_ms_count" and s.labels["span"] == "ttft" and s.value >= 1 for s in samples)
