"""A client that talks and never reads, against a server with the real engines: its replies pile up, their
audio is dropped, then the server closes it (1008 "client is not reading"); the server's memory stays
bounded and another session on the same server completes a turn meanwhile.

The server here is a second one sharing the fixture's engines, with a small outbox and a small kernel
send buffer, so that this takes about a minute (~60 s measured) rather than many: on loopback Linux
autotunes a socket's send buffer up to ``tcp_wmem``'s maximum (4 MiB), which alone would hold a minute of
reply audio (~64 KiB/s of base64) before the outbox saw any of it. Its keepalive is pushed out of the way:
a client that never reads never answers a PING either, and is otherwise closed with 1008 after at most
40 s (that path is tested in tests/unit/metrics/test_prometheus.py) -- with the default limits (4 MiB
outbox, autotuned kernel buffers) that is what closes a never-reading client, long before its outbox would.

The small outbox applies to every connection of that server: a reply's sentence is synthesized and queued
at once (100 ms deltas, ~6.4 KiB of JSON each), so any sentence over ~0.25 s is over 16 KiB and the first
audio is shed at the first sentence, before the pipe to the slow client is even full (the same happens to
the client that reads). What closes the slow client is what cannot be shed: its other events (~15 KiB a
voice turn) once the ~110 KiB in front of the outbox (asyncio's write buffer, the kernel's) are full, a
few turns. The other session's turn is checked for its text, its completion and some audio, not all of it.

The memory is the process's RSS after ``malloc_trim(0)`` (what `serve` gives back every 30 s on glibc, its
HeapTrimmer; this process runs no trimmer of its own), sampled every 5 s: between trims glibc's arenas keep
the pages that the engines' threads allocate and free for every partial transcript and sentence of every
talking session, 100-400 MiB within half a minute (measured here untrimmed: +246, +321 and +386 MiB at peak),
which says nothing of what the slow client holds. Trimmed, a sample taken during a turn still holds that turn's
working memory (engine buffers: +90-95 MiB measured, at two of twelve samples), one taken between turns a few
MiB. What a never-reading client holds is what stays once it is gone: its queued replies (the bug this guards
against kept +141 MiB after the client left, growing by ~5 MiB/s); measured with the bounded outbox: -4 MiB.
"""

import asyncio
import json
import logging
import socket
import time

import pytest
import pytest_asyncio
from aiohttp import web
from prometheus_client import REGISTRY

from sub250 import native_memory
from scripts.bench.corpus import Utterance
from scripts.bench.slow_client import NeverReadingClient, speech_frames
from sub250.gateway import ApiKeys, GatewayLimits
from sub250.sdk import RealtimeClient
from sub250.server import Server
from sub250.transport import websocket
from sub250.transport.http import SOCKETS, build_app, runner_options

pytestmark = pytest.mark.engines
TEST_KEY = "sk-sub250-test-0123456789"

#: The dedicated server's outbox limit, and its sockets' kernel send buffer (Linux doubles it).
OUTBOX_BYTES = 16 * 1024
SNDBUF = 16 * 1024
#: From the slow client's connect to its close by the server (one voice turn is ~15 KiB of events besides its
#: audio; the kernel and aiohttp buffers hold ~100 KiB more before the outbox fills: a few turns).
CLOSE_BOUND_S = 120.0
#: The server's trimmed RSS (see above) may grow by at most this at any 5-s sample, a turn's working memory
#: included, and by at most KEPT_BOUND once the slow client has gone (the least of KEPT_SAMPLES trimmed samples
#: a second apart: what stays, not a turn's working memory a moment before it is freed). The server is this process, engines
#: included. The outbox's own bound is checked exactly (backlog).
RSS_BOUND = 192 << 20
KEPT_BOUND = 64 << 20
KEPT_SAMPLES = 4
#: The untrimmed RSS is only sanity-checked: allocator churn between trims, not memory held (see above).
RAW_RSS_BOUND = 768 << 20

QUESTIONS = ("How often do I need to buy a new filter?", "How many years is the motor guaranteed for?",
             "What should I do if the fan makes a rattling noise?")


def rss() -> int:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmRSS:"))


async def trimmed_rss() -> int:
    """The RSS once the heap's free pages are given back, as `serve`'s HeapTrimmer does (on a worker thread)."""
    await asyncio.to_thread(native_memory.trim)
    return rss()


def counter(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


@pytest_asyncio.fixture
async def small_server(server):
    """A Server on the fixture's engines with a small outbox, listening on a socket whose accepted
    connections inherit a small send buffer (Server.listen would let the kernel autotune it)."""
    srv = Server("127.0.0.1", 0, keys=ApiKeys([TEST_KEY]), limits=GatewayLimits(max_outbox_bytes=OUTBOX_BYTES))
    app = build_app(srv)
    runner = web.AppRunner(app, **runner_options())
    await runner.setup()
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, SNDBUF)
    sock.bind(("127.0.0.1", 0))
    try:
        await web.SockSite(runner, sock).start()
        srv.port = sock.getsockname()[1]
        srv.attach(server.stack)
        yield srv, app
    finally:
        await runner.cleanup()
        sock.close()


async def test_a_never_reading_client_loses_its_audio_then_is_closed_and_others_go_on(small_server, speak,
                                                                                      monkeypatch, caplog):
    srv, app = small_server
    monkeypatch.setattr(websocket, "PING_INTERVAL_S", 600.0)
    caplog.set_level(logging.INFO, logger="sub250.transport.websocket")
    url = f"ws://127.0.0.1:{srv.port}/v1/realtime"
    utts = [Utterance(f"q{i}", speak(q), q, "synthetic") for i, q in enumerate(QUESTIONS)]
    normal = RealtimeClient(url, TEST_KEY)
    await normal.connect()
    try:
        # warm every engine (VAD, ASR, retrieval, LLM, TTS) before the memory is measured
        sender = asyncio.ensure_future(normal.send_wav(str(utts[0].path), silence_after_ms=1500))
        warm = await normal.collect_turn(timeout=120)
        await sender
        assert warm.status == "completed", warm.errors
        other = sum(len(json.dumps(e.data)) for e in warm.events if e.type != "response.output_audio.delta")
        print(f"\none voice turn: {other / 1024:.1f} KiB of events besides its audio deltas")
        rss0 = await trimmed_rss()
        peak = raw_peak = rss0
        dropped0 = counter("sub250_outbox_dropped_audio_total")
        closes0 = counter("sub250_slow_client_closes_total", reason="outbox_full")

        slow = NeverReadingClient(url, TEST_KEY, rcvbuf=4096)
        await slow.connect()
        t0 = time.monotonic()
        stop = asyncio.Event()
        streaming = asyncio.ensure_future(slow.stream(speech_frames(utts[1:], gap_s=4.0), stop))

        backlog = 0  # the most bytes any connection of this server had queued and unsent
        timeline: list[tuple[float, float]] = []  # (s since the slow client connected, RSS growth MiB)

        async def until(what: str, predicate) -> float:
            nonlocal peak, raw_peak, backlog
            while not predicate():
                raw_peak = max(raw_peak, rss())
                if not timeline or time.monotonic() - t0 - timeline[-1][0] >= 5:
                    now = await trimmed_rss()
                    peak = max(peak, now)
                    timeline.append((round(time.monotonic() - t0, 1), round((now - rss0) / 2**20, 1)))
                backlog = max([backlog] + [t.outbox.queued_bytes for t in app[SOCKETS]])
                elapsed = time.monotonic() - t0
                assert elapsed < CLOSE_BOUND_S, f"{what}: not within {CLOSE_BOUND_S:.0f} s"
                assert not streaming.done(), f"{what}: the slow client stopped first ({slow.stream_end}: " \
                                             f"{slow.stream_error})"
                await asyncio.sleep(0.25)
            return time.monotonic() - t0

        try:
            dropped_at = await until("reply audio dropped",
                                     lambda: counter("sub250_outbox_dropped_audio_total") > dropped0)
            # meanwhile, the other session has a turn
            await normal.send_text("How many years is the motor guaranteed for?")
            turn = asyncio.ensure_future(normal.collect_turn(timeout=120))
            closed_at = await until("closed by the server",
                                    lambda: counter("sub250_slow_client_closes_total", reason="outbox_full") > closes0)
            result = await turn
        finally:
            stop.set()
            (ended,) = await asyncio.gather(streaming, return_exceptions=True)
        assert not isinstance(ended, BaseException), ended
        # the client reads at last: the connection is over. It gets the close frame (1008) unless the server's
        # socket, closed with audio appends still unread, reset the connection first (1006): see slow_client.py
        drain = await slow.drain(15)
        await slow.close()
        raw_peak = max(raw_peak, rss())
        # what stays: the least of a few trimmed samples a second apart (one can still hold a turn's working
        # memory, freed a moment later: +68.6 MiB once in a CI run, +24.4 alone; a leak holds at every sample)
        kept = []
        for _ in range(KEPT_SAMPLES):
            kept.append(await trimmed_rss() - rss0)
            peak = max(peak, rss0 + kept[-1])
            await asyncio.sleep(1.0)
        grown = min(kept)
        print(f"\nslow client: audio dropped after {dropped_at:.1f} s, closed after {closed_at:.1f} s "
              f"({slow.audio_sent_s:.0f} s of speech sent); it saw {drain['close_code']} after {drain['messages']} "
              f"messages; outbox at most {backlog} bytes; trimmed RSS +{(peak - rss0) / 2**20:.1f} MiB at peak, "
              f"{grown / 2**20:+.1f} MiB at the end (least of {[round(k / 2**20, 1) for k in kept]}), over time (s, MiB): {timeline}; untrimmed RSS "
              f"+{(raw_peak - rss0) / 2**20:.1f} MiB at peak; the other session's reply: "
              f"{result.audio_seconds:.2f} s of audio for {result.reply!r}")
        assert dropped_at < closed_at
        assert 0 < backlog <= OUTBOX_BYTES
        assert "realtime connection closing (1008 client is not reading)" in caplog.text
        assert drain["ended"] and drain["close_code"] in (1008, 1006), drain
        if drain["close_code"] == 1008:
            assert drain["close_reason"] == "client is not reading"
        assert result.status == "completed" and result.reply and result.audio_seconds > 0, result.errors
        assert result.latency is not None and result.latency.final
        assert peak - rss0 < RSS_BOUND and grown < KEPT_BOUND, (
            f"trimmed RSS grew by {(peak - rss0) / 2**20:.1f} MiB at peak, {grown / 2**20:.1f} MiB at the end")
        assert raw_peak - rss0 < RAW_RSS_BOUND, f"untrimmed RSS grew by {(raw_peak - rss0) / 2**20:.1f} MiB"
    finally:
        await normal.close()
