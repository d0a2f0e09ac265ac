"""Twilio's side of a phone call, written from Twilio's documentation: the signed webhook, then the Media Stream.

For the tests and the benchmarks of app/telephony. :func:`webhook` posts the "A call comes in" form as Twilio does,
signed with the ``twilio`` package's own ``RequestValidator.compute_signature``; :class:`MediaStream` then plays
Twilio's part of the WebSocket: ``connected``, ``start`` (with the TwiML's ``<Parameter>``s), the caller's audio
as ``media`` frames of 20 ms μ-law at the real pace, ``dtmf``, ``stop``; and, like Twilio's player, it takes the
server's ``media`` into a buffer played in real time, echoes each ``mark`` when the audio before it has played,
and on ``clear`` empties the buffer and echoes the marks still in it.

Audio is encoded and decoded by libsndfile (``soundfile``), not by the code under test.
"""

from __future__ import annotations

import asyncio
import base64
import io
import json
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import numpy as np
import soundfile as sf
import soxr

RATE = 8000
FRAME = RATE // 50  # 20 ms
SILENCE = b"\xff" * FRAME  # μ-law's zero


def mu_law(path_or_pcm: Any, rate: int | None = None) -> bytes:
    """A sound file (or float32 samples at ``rate``) -> μ-law at 8 kHz, mono."""
    if rate is None:
        data, rate = sf.read(str(path_or_pcm), dtype="float32", always_2d=True)
        samples = data.mean(axis=1)
    else:
        samples = np.asarray(path_or_pcm, dtype=np.float32)
    narrow = soxr.resample(samples, rate, RATE) if rate != RATE else samples
    out = io.BytesIO()
    sf.write(out, narrow, RATE, format="RAW", subtype="ULAW")
    return out.getvalue()


def pcm_of(mu: bytes) -> np.ndarray:
    """μ-law bytes -> float32 at 8 kHz."""
    if not mu:
        return np.zeros(0, np.float32)
    return sf.read(io.BytesIO(mu), dtype="float32", format="RAW", subtype="ULAW", samplerate=RATE, channels=1)[0]


@dataclass
class Twiml:
    stream_url: str
    parameters: dict[str, str]


def parse_twiml(text: str) -> Twiml:
    """The ``<Connect><Stream url=...>`` of a webhook's answer and its ``<Parameter>``s."""
    stream = ET.fromstring(text).find("./Connect/Stream")
    if stream is None:
        raise ValueError(f"no <Connect><Stream> in {text[:200]!r}")
    return Twiml(stream.get("url", ""), {p.get("name", ""): p.get("value", "") for p in stream.findall("Parameter")})


async def webhook(url: str, auth_token: str | None, *, call_sid: str = "CA" + "0" * 32,
                  params: dict[str, str] | None = None, signature: str | None = None) -> tuple[int, str]:
    """POST the voice webhook as Twilio does; signed with ``auth_token`` (None: unsigned; ``signature``: that
    header as given). Returns (status, body)."""
    from twilio.request_validator import RequestValidator

    form = {"CallSid": call_sid, "AccountSid": "AC" + "1" * 32, "From": "+15550100", "To": "+15550199",
            "CallStatus": "ringing", "Direction": "inbound", "ApiVersion": "2010-04-01", **(params or {})}
    headers = {}
    if signature is not None:
        headers["X-Twilio-Signature"] = signature
    elif auth_token is not None:
        headers["X-Twilio-Signature"] = RequestValidator(auth_token).compute_signature(url, form)
    async with aiohttp.ClientSession() as http, http.post(url, data=form, headers=headers) as resp:
        return resp.status, await resp.text()


@dataclass
class Heard:
    """What the server sent back on the stream."""

    media: list[tuple[float, bytes]] = field(default_factory=list)  # (monotonic time received, μ-law)
    marks: list[str] = field(default_factory=list)
    clears: list[float] = field(default_factory=list)
    other: list[dict[str, Any]] = field(default_factory=list)

    def audio(self, since: float = 0.0) -> bytes:
        return b"".join(m for t, m in self.media if t >= since)

    def first_media(self, since: float = 0.0) -> float | None:
        return next((t for t, _ in self.media if t >= since), None)


class MediaStream:
    """One stream, as Twilio runs it. ``async with MediaStream(url, call_sid, parameters) as call: ...``."""

    def __init__(self, url: str, call_sid: str, parameters: dict[str, str], *,
                 stream_sid: str = "MZ" + "2" * 32) -> None:
        self.url, self.call_sid, self.parameters, self.stream_sid = url, call_sid, parameters, stream_sid
        self.heard = Heard()
        self.close_code: int | None = None
        self._seq = 0
        self._chunk = 0
        self._http: aiohttp.ClientSession | None = None
        self.ws: aiohttp.ClientWebSocketResponse | None = None
        self._reader: asyncio.Task | None = None
        self._played_until = 0.0  # monotonic time the buffered reply audio will have played
        self._echoes: list[asyncio.TimerHandle] = []
        self._pending_marks: list[str] = []

    async def __aenter__(self) -> MediaStream:
        self._http = aiohttp.ClientSession()
        self.ws = await self._http.ws_connect(self.url)
        await self._send({"event": "connected", "protocol": "Call", "version": "1.0.0"})
        await self._send({"event": "start", "start": {
            "accountSid": "AC" + "1" * 32, "streamSid": self.stream_sid, "callSid": self.call_sid,
            "tracks": ["inbound"], "mediaFormat": {"encoding": "audio/x-mulaw", "sampleRate": RATE, "channels": 1},
            "customParameters": self.parameters}, "streamSid": self.stream_sid})
        self._reader = asyncio.ensure_future(self._read())
        return self

    async def __aexit__(self, *exc: object) -> None:
        for handle in self._echoes:
            handle.cancel()
        if self.ws is not None and not self.ws.closed:
            await self.ws.close()
        if self._reader is not None:
            await asyncio.gather(self._reader, return_exceptions=True)
        if self._http is not None:
            await self._http.close()

    async def _send(self, msg: dict[str, Any]) -> None:
        self._seq += 1
        assert self.ws is not None
        await self.ws.send_str(json.dumps({"sequenceNumber": str(self._seq), **msg}))

    async def say(self, mu: bytes, *, realtime: bool = True) -> float:
        """The caller's audio, 20 ms a frame at the real pace; returns when its last frame was sent (monotonic)."""
        t0 = time.monotonic()
        for i in range(0, len(mu), FRAME):
            self._chunk += 1
            await self._send({"event": "media", "streamSid": self.stream_sid, "media": {
                "track": "inbound", "chunk": str(self._chunk), "timestamp": str(self._chunk * 20),
                "payload": base64.b64encode(mu[i:i + FRAME]).decode()}})
            if realtime:
                await asyncio.sleep(max(0.0, t0 + (i + FRAME) / RATE - time.monotonic()))
        return time.monotonic()

    async def silence(self, seconds: float) -> None:
        """A phone line keeps sending frames while the caller is quiet."""
        await self.say(SILENCE * int(seconds * 50))

    async def dtmf(self, digit: str) -> None:
        await self._send({"event": "dtmf", "streamSid": self.stream_sid,
                          "dtmf": {"track": "inbound_track", "digit": digit}})

    async def stop(self) -> None:
        await self._send({"event": "stop", "streamSid": self.stream_sid,
                          "stop": {"accountSid": "AC" + "1" * 32, "callSid": self.call_sid}})

    async def raw(self, text: str) -> None:
        assert self.ws is not None
        await self.ws.send_str(text)

    async def _read(self) -> None:
        assert self.ws is not None
        loop = asyncio.get_running_loop()
        async for msg in self.ws:
            if msg.type != aiohttp.WSMsgType.TEXT:
                continue
            event = json.loads(msg.data)
            now = time.monotonic()
            kind = event.get("event")
            if event.get("streamSid") != self.stream_sid:
                self.heard.other.append(event)
            elif kind == "media":
                audio = base64.b64decode(event["media"]["payload"])
                self.heard.media.append((now, audio))
                self._played_until = max(now, self._played_until) + len(audio) / RATE
            elif kind == "mark":
                name = event["mark"]["name"]
                self._pending_marks.append(name)
                self._echoes.append(loop.call_later(max(0.0, self._played_until - now), self._echo, name))
            elif kind == "clear":
                self.heard.clears.append(now)
                for handle in self._echoes:
                    handle.cancel()
                self._echoes.clear()
                self._played_until = now
                for name in list(self._pending_marks):  # Twilio echoes the marks it dropped
                    self._echo(name)
            else:
                self.heard.other.append(event)
        self.close_code = self.ws.close_code

    def _echo(self, name: str) -> None:
        if name in self._pending_marks:
            self._pending_marks.remove(name)
            self.heard.marks.append(name)
            asyncio.ensure_future(self._send({"event": "mark", "streamSid": self.stream_sid, "mark": {"name": name}}))

    async def closed(self, timeout: float) -> int | None:
        """Wait for the server to close the socket; its close code."""
        assert self._reader is not None
        await asyncio.wait_for(asyncio.shield(self._reader), timeout)
        return self.close_code


#: scripts/bench_phone.py's paths, and the figures its table shows of each.
PATHS = ("twilio", "sip", "websocket")
SHOWN = ("voice_to_voice", "ttft", "endpoint_delay")


def compare(rows: list[dict[str, Any]], rounds: int) -> tuple[str, dict[str, Any]]:
    """scripts/bench_phone.py's table: per path and round, p50/p95 of :data:`SHOWN` and WER; and the summaries."""
    from scripts.bench.stats import summarize

    lines = [f"{'path':<10}{'round':>6}{'n':>4}" + "".join(f"{name + ' p50/p95':>28}" for name in SHOWN)
             + f"{'WER':>8}"]
    summary: dict[str, Any] = {}
    for r in range(1, rounds + 1):
        for path in PATHS:
            mine = [t for t in rows if t["path"] == path and t["round"] == r]
            s = summarize(mine)
            summary[f"{path}/{r}"] = s
            cells = []
            for name in SHOWN:
                span = s["spans"][name]
                cells.append("-" if span["p50"] is None else f"{span['p50']:.0f} / {span['p95']:.0f}")
            wer = s["wer"].get("all")
            lines.append(f"{path:<10}{r:>6}{s['completed']:>4}" + "".join(f"{c:>28}" for c in cells)
                         + f"{'-' if wer is None else f'{100 * wer:.1f} %':>8}")
    return "\n".join(lines), summary
