"""/metrics: the process gauges - sessions open (WebSocket + WebRTC), asyncio tasks at scrape time, reply audio
dropped for slow clients and the closes of slow clients, prometheus_client's process RSS / FDs - and the
``replica`` label on every series. A real server (aiohttp, real sockets) with a stand-in session: no engines."""

import asyncio
import json
import math
import socket
from typing import Any

import aiohttp
import pytest
from prometheus_client import REGISTRY, Counter, generate_latest
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import CollectorRegistry
from websockets.asyncio.client import connect

from scripts.bench.probe import metric_sum, parse_metrics
from sub250.gateway import ApiKeys, GatewayLimits, KeyLimiter, Principal
from sub250.metrics import prometheus
from sub250.metrics.prometheus import ReplicaLabelled, exposition
from sub250.metrics.timeline import TurnTimeline
from sub250.protocol import ProtocolError, server_event
from sub250.server import Server
from sub250.transport import dispatch, websocket
from sub250.transport.outbox import Outbox
from sub250.transport.webrtc import WebRTCCall, open_call

TEST_KEY = "sk-sub250-unit-000000000000"
AUTH = {"Authorization": f"Bearer {TEST_KEY}"}


class QuietSession:
    """The session contract, doing nothing but saying hello."""

    def __init__(self, shared: Any, transport: Any, model: str | None = None) -> None:
        self.transport = transport
        self.closed = False

    def start(self) -> None:
        self.transport.send(server_event("session.created", session={"type": "realtime"}))

    async def handle(self, event: Any, received_ns: int) -> None:
        pass

    async def handle_audio(self, pcm16: bytes, rate: int, received_ns: int) -> None:
        pass

    def error(self, err: Any) -> None:
        pass

    async def close(self) -> None:
        self.closed = True


@pytest.fixture
def quiet_sessions(monkeypatch):
    monkeypatch.setattr(dispatch, "new_session", QuietSession)


@pytest.fixture
async def srv(quiet_sessions):
    server = Server("127.0.0.1", 0, keys=ApiKeys([TEST_KEY]), limits=GatewayLimits())
    await server.listen()
    server.state, server.shared = "ready", object()
    yield server
    await server.close()


def value(name: str, **labels: str) -> float:
    v = REGISTRY.get_sample_value(name, labels)
    assert v is not None, f"{name}{labels} is not in the registry"
    return v


async def scrape(server: Server) -> str:
    async with aiohttp.ClientSession() as http:
        async with http.get(f"http://127.0.0.1:{server.port}/metrics") as resp:
            assert resp.status == 200
            return await resp.text()


def sample(text: str, name: str, **labels: str) -> float:
    """The value of the one series of ``name`` with ``labels`` (others, e.g. ``replica``, whatever they are)."""
    value = metric_sum(parse_metrics(text), name, **labels)
    assert value is not None, f"{name}{labels} not in /metrics"
    return value


async def wait_until(predicate, timeout: float = 5.0) -> None:
    for _ in range(int(timeout / 0.02)):
        if predicate():
            return
        await asyncio.sleep(0.02)
    raise AssertionError("condition not reached")


def test_the_default_registry_exports_process_rss_and_open_fds():
    text = generate_latest().decode()
    assert sample(text, "process_resident_memory_bytes") > 1 << 20
    assert sample(text, "process_open_fds") >= 3


async def test_asyncio_tasks_are_counted_on_the_running_loop_at_scrape_time():
    before = value("sub250_asyncio_tasks")
    assert before == len(asyncio.all_tasks())
    sleepers = [asyncio.ensure_future(asyncio.sleep(30)) for _ in range(3)]
    try:
        assert value("sub250_asyncio_tasks") == before + 3
    finally:
        for task in sleepers:
            task.cancel()
        await asyncio.gather(*sleepers, return_exceptions=True)
    assert value("sub250_asyncio_tasks") == before


def test_asyncio_tasks_is_nan_when_collected_outside_an_event_loop():
    assert math.isnan(value("sub250_asyncio_tasks"))


def test_the_outbox_counts_dropped_audio_and_the_close_of_a_client_that_does_not_read():
    dropped, closes = value("sub250_outbox_dropped_audio_total"), value("sub250_slow_client_closes_total",
                                                                       reason="outbox_full")
    box = Outbox(max_bytes=15_000)
    for i in range(4):
        box.send({"type": "response.output_audio.delta", "delta": "A" * 3000}, tag="r1", audio=True)
    box.send({"type": "response.output_audio.delta", "delta": "A" * 3000}, tag="r2", audio=True)
    assert value("sub250_outbox_dropped_audio_total") - dropped == box.dropped_audio == 4  # r1's, all of it
    box.purge("r2")  # barge-in: not a slow client, not counted
    assert value("sub250_outbox_dropped_audio_total") - dropped == 4
    assert value("sub250_slow_client_closes_total", reason="outbox_full") == closes
    box.send({"type": "x", "pad": "y" * 16_000})  # no audio left to drop: the outbox closes
    assert box.overflowed
    assert value("sub250_slow_client_closes_total", reason="outbox_full") == closes + 1


async def test_sessions_open_follow_websocket_connections_and_metrics_serves_everything(srv):
    text = await scrape(srv)
    before = sample(text, "sub250_sessions_open", transport="websocket")
    assert sample(text, "sub250_asyncio_tasks") >= 1  # served on the loop: a number, not NaN
    assert sample(text, "process_resident_memory_bytes") > 0 and sample(text, "process_open_fds") > 0
    assert sample(text, "sub250_slow_client_closes_total", reason="ping_timeout") >= 0
    assert "sub250_outbox_dropped_audio_total" in text
    async with connect(f"ws://127.0.0.1:{srv.port}/v1/realtime", additional_headers=AUTH) as a, \
            connect(f"ws://127.0.0.1:{srv.port}/v1/realtime", additional_headers=AUTH) as b:
        for ws in (a, b):
            assert json.loads(await ws.recv())["type"] == "session.created"
        assert sample(await scrape(srv), "sub250_sessions_open", transport="websocket") == before + 2
    await wait_until(lambda: value("sub250_sessions_open", transport="websocket") == before)


async def test_a_refused_websocket_session_is_not_counted(quiet_sessions):
    server = Server("127.0.0.1", 0, keys=ApiKeys([TEST_KEY]), limits=GatewayLimits(max_sessions_per_key=1))
    await server.listen()
    server.state, server.shared = "ready", object()
    try:
        before = value("sub250_sessions_open", transport="websocket")
        async with connect(f"ws://127.0.0.1:{server.port}/v1/realtime", additional_headers=AUTH) as first:
            await first.recv()
            async with connect(f"ws://127.0.0.1:{server.port}/v1/realtime", additional_headers=AUTH) as second:
                assert json.loads(await second.recv())["error"]["code"] == "session_limit"
                await asyncio.wait_for(second.wait_closed(), 5)
            assert value("sub250_sessions_open", transport="websocket") == before + 1
        await wait_until(lambda: value("sub250_sessions_open", transport="websocket") == before)
    finally:
        await server.close()


async def test_a_webrtc_call_is_an_open_session_until_it_closes(quiet_sessions):
    before = value("sub250_sessions_open", transport="webrtc")
    call = WebRTCCall("rtc_test", Principal("k"), object(), KeyLimiter(GatewayLimits()))
    assert value("sub250_sessions_open", transport="webrtc") == before + 1
    await call.close()
    assert value("sub250_sessions_open", transport="webrtc") == before
    # a call whose offer is refused is closed at once: counted, then not
    with pytest.raises(ProtocolError):
        await open_call(Principal("k"), object(), KeyLimiter(GatewayLimits()), "v=0\r\nm=audio 9 x\r\n")
    assert value("sub250_sessions_open", transport="webrtc") == before


async def test_a_client_that_never_answers_the_keepalive_ping_is_counted_as_a_slow_client_close(srv, monkeypatch):
    monkeypatch.setattr(websocket, "PING_INTERVAL_S", 0.2)
    monkeypatch.setattr(websocket, "PING_TIMEOUT_S", 0.3)
    before = value("sub250_slow_client_closes_total", reason="ping_timeout")
    loop = asyncio.get_running_loop()
    sock = socket.socket()
    sock.setblocking(False)
    try:
        await loop.sock_connect(sock, ("127.0.0.1", srv.port))
        await loop.sock_sendall(sock, (
            f"GET /v1/realtime HTTP/1.1\r\nHost: 127.0.0.1:{srv.port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            f"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
            f"Authorization: Bearer {TEST_KEY}\r\n\r\n").encode())
        assert (await asyncio.wait_for(loop.sock_recv(sock, 1024), 5)).startswith(b"HTTP/1.1 101")
        # it never reads again, so never answers a PING
        await wait_until(lambda: value("sub250_slow_client_closes_total", reason="ping_timeout") == before + 1)
    finally:
        sock.close()


# --- the replica label --------------------------------------------------------------------------------------


def test_every_sample_of_the_exposition_carries_the_replica_label():
    tl = TurnTimeline("t")
    for name, at in (("turn_commit", 0), ("asr_final", 10), ("first_token_sent", 100)):
        tl.mark(name, at * 1_000_000)
    prometheus.observe(tl)  # histogram buckets, sums, counts and _created samples exist
    families = list(text_string_to_metric_families(exposition("replica-a").decode()))
    samples = [s for fam in families for s in fam.samples]
    assert len(samples) > 50 and {fam.type for fam in families} >= {"counter", "gauge", "histogram"}
    assert all(s.labels.get("replica") == "replica-a" for s in samples), \
        [s for s in samples if s.labels.get("replica") != "replica-a"][:3]
    ttft = [s for s in samples if s.name == "sub250_turn_span_ms_bucket" and s.labels["span"] == "ttft"]
    assert ttft and all(set(s.labels) == {"span", "le", "replica"} for s in ttft)
    # the metrics keep their names, types and help; only the label is new
    assert {f.name for f in families} == {f.name for f in text_string_to_metric_families(generate_latest().decode())}
    # the benchmark's parser sums over it
    assert metric_sum(parse_metrics(exposition("replica-a").decode()), "sub250_turn_span_ms_count", span="ttft") >= 1


def test_an_empty_replica_is_the_host_name_and_a_registry_can_be_given():
    registry = CollectorRegistry()
    Counter("made_total", "a counter", ["kind"], registry=registry).labels(kind="x").inc()
    text = generate_latest(ReplicaLabelled("r2", registry)).decode()
    assert 'made_total{kind="x",replica="r2"} 1.0' in text
    hostname = {s.labels["replica"] for f in text_string_to_metric_families(exposition().decode()) for s in f.samples}
    assert hostname == {socket.gethostname()}


async def test_metrics_over_http_name_the_servers_replica(quiet_sessions):
    server = Server("127.0.0.1", 0, keys=ApiKeys([TEST_KEY]), limits=GatewayLimits(), replica="replica-b")
    await server.listen()
    server.state, server.shared = "ready", object()
    try:
        samples = [s for f in text_string_to_metric_families(await scrape(server)) for s in f.samples]
        assert samples and {s.labels.get("replica") for s in samples} == {"replica-b"}
    finally:
        await server.close()
