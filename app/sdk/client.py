"""RealtimeClient: connect, stream audio (raw or from a WAV, at real-time pace), read typed events."""

from __future__ import annotations

import asyncio
import base64
import json
import time
from collections import deque
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, urlsplit

from sub250.sdk.events import ServerEvent, Sources, TurnLatency
from sub250.sdk.playback import Playback
from sub250.sdk.tools import ToolRun, ToolSet

RATE = 24_000
#: The sub250 events this client reads, asked for in ``session.include`` (the server's names:
#: app/protocol/extensions.py; the SDK imports nothing of the server).
SUB250_EVENTS = ("sub250.latency", "sub250.sources", "sub250.partials", "sub250.pauses")


#: Events ``wait_for`` passes over are kept for the next reads, at most this many (then the oldest go, counted
#: in ``RealtimeClient.dropped_events``).
MAX_BACKLOG = 10_000
#: The longest a ``Retry-After`` is waited for before connecting again.
MAX_RETRY_AFTER_S = 30.0


def _b64_ms(delta: str) -> float:
    """Milliseconds of PCM16 mono audio at :data:`RATE` in a base64 string (without decoding it)."""
    n = len(delta) * 3 // 4 - delta[-2:].count("=")
    return n / 2 / RATE * 1000


def _retry_after(headers: Any) -> float | None:
    """Seconds of a ``Retry-After: <seconds>`` header (None when absent or not a number)."""
    try:
        value = float(headers.get("Retry-After", ""))
    except ValueError:
        return None
    return value if value >= 0 else None


class ConnectionLost(Exception):
    """The connection dropped; ``await client.reconnect()`` opens a new session with the same settings."""


@dataclass
class TurnResult:
    """What one spoken or typed turn produced, as the client saw it."""

    transcript: str = ""
    reply: str = ""
    audio: bytearray = field(default_factory=bytearray)  # PCM16 24 kHz
    status: str = ""
    latency: TurnLatency | None = None
    sources: list[dict[str, Any]] = field(default_factory=list)
    errors: list[ServerEvent] = field(default_factory=list)
    #: The tool calls the SDK answered during the turn (``RealtimeClient.tool``), and the latency report of
    #: the response that asked for them (``latency`` is then the answer's).
    tool_runs: list[ToolRun] = field(default_factory=list)
    tool_latency: TurnLatency | None = None
    events: list[ServerEvent] = field(default_factory=list)
    #: Client clock (perf_counter_ns) of: last audio frame sent, first text delta, first audio delta, done.
    sent_end_ns: int = 0
    first_text_ns: int = 0
    first_audio_ns: int = 0
    done_ns: int = 0

    @property
    def audio_seconds(self) -> float:
        return len(self.audio) / 2 / RATE

    def absorb(self, ev: ServerEvent) -> None:
        """Fold one server event into the result."""
        self.events.append(ev)
        t = ev.type
        if t == "conversation.item.input_audio_transcription.completed":
            self.transcript = ev.data.get("transcript", "")
        elif t in ("response.output_text.delta", "response.output_audio_transcript.delta"):
            self.first_text_ns = self.first_text_ns or ev.received_ns
            self.reply += ev.delta
        elif t == "response.output_audio.delta":
            self.first_audio_ns = self.first_audio_ns or ev.received_ns
            self.audio += ev.audio()
        elif t == "sub250.sources":
            self.sources = Sources.from_event(ev).sources
        elif t == "error":
            self.errors.append(ev)
        elif t == "response.done":
            self.status = ev.data["response"]["status"]
            self.done_ns = ev.received_ns
        elif t == "sub250.turn.latency":
            self.latency = TurnLatency.from_event(ev)


class RealtimeClient:
    def __init__(self, url: str = "ws://127.0.0.1:8250/v1/realtime", api_key: str | None = None, *,
                 model: str | None = None, connect_retries: int = 3, auto_truncate: bool = True,
                 include: Sequence[str] = SUB250_EVENTS, call_id: str | None = None) -> None:
        """``auto_truncate``: when the caller talks over a reply (``speech_started``), tell the server how much
        of it was played (``conversation.item.truncate``, from :attr:`playback`), so that its history holds what
        the caller heard. ``include``: the ``session.include`` every session update sends - by default every
        sub250 event (latency reports, sources, partial transcripts, pauses), which :meth:`collect_turn` reads;
        ``()``: the GA API's events only. ``call_id``: follow and steer a phone call instead of opening a session
        (its events, its tools, :meth:`refer`; the audio stays on the phone)."""
        self.base_url = url
        self.call_id = call_id
        for name, value in (("model", model), ("call_id", call_id)):
            if value is not None:
                url = f"{url}{'&' if '?' in url else '?'}{name}={quote(value, safe='')}"
        self.url = url
        self.api_key = api_key
        self.connect_retries = connect_retries
        self.ws: Any = None
        self.session: dict[str, Any] = {}
        self._session_update: dict[str, Any] | None = None
        self._queue: asyncio.Queue[ServerEvent | None] = asyncio.Queue()
        #: Events ``wait_for`` passed over, handed out again first, in order (nothing is thrown away).
        self._backlog: deque[ServerEvent] = deque()
        self.dropped_events = 0
        self._reader: asyncio.Task | None = None
        #: Input audio sent in this session (ms) and (end_ms, perf_counter_ns) of recent frames, so that the
        #: server's audio positions (``audio_end_ms``) can be mapped to client send times.
        self.audio_sent_ms = 0.0
        self._sent_log: list[tuple[float, int]] = []
        #: Client tools (:meth:`tool`): sent with every ``update_session``, run when a response calls them.
        self.tools = ToolSet()
        #: Where the reply audio's playback stands (a real-time player unless the app reports its own).
        self.playback = Playback()
        self.auto_truncate = auto_truncate
        self.include = tuple(include)
        #: The ``conversation.item.truncate`` events this client sent by itself.
        self.truncations: list[dict[str, Any]] = []

    def tool(self, fn: Any = None, **options: Any) -> Any:
        """Register a function the model may call (``@client.tool`` or ``@client.tool(timeout_s=3)``); see
        :mod:`sub250.sdk.tools`. Register before ``update_session``: the tools go with it."""
        return self.tools.tool(fn, **options)

    async def __aenter__(self) -> RealtimeClient:
        await self.connect()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def connect(self) -> None:
        from websockets.asyncio.client import connect
        from websockets.exceptions import InvalidStatus

        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        delay = 0.25
        for attempt in range(self.connect_retries + 1):
            try:
                self.ws = await connect(self.url, additional_headers=headers, max_size=None, compression=None)
                break
            except InvalidStatus as exc:  # 503: the server is still loading its engines; it says when to retry
                if exc.response.status_code != 503 or attempt == self.connect_retries:
                    raise
                await asyncio.sleep(min(MAX_RETRY_AFTER_S, _retry_after(exc.response.headers) or delay))
                delay *= 2
            except OSError:
                if attempt == self.connect_retries:
                    raise
                await asyncio.sleep(delay)
                delay *= 2
        self._queue = asyncio.Queue()
        self._backlog.clear()
        self.audio_sent_ms = 0.0
        self._sent_log = []
        self._reader = asyncio.ensure_future(self._read())
        created = await self.wait_for("session.created", timeout=10)
        self.session = created.data.get("session", {})
        if self._session_update is not None or self.include:
            await self.update_session(**(self._session_update or {}))

    async def reconnect(self) -> None:
        await self.close()
        await self.connect()

    async def close(self) -> None:
        if self.ws is not None:
            await self.ws.close()
        if self._reader is not None:
            self._reader.cancel()
            try:
                await self._reader
            except (asyncio.CancelledError, Exception):
                pass
        self.ws = None

    async def _read(self) -> None:
        from websockets.exceptions import ConnectionClosed

        try:
            async for raw in self.ws:
                now = time.perf_counter_ns()
                data = json.loads(raw)
                kind = data.get("type", "")
                if kind == "response.output_audio.delta":
                    self.playback.received(data.get("item_id", ""), _b64_ms(data.get("delta", "")), now)
                elif kind == "input_audio_buffer.speech_started":
                    await self._interrupted(now)
                self._queue.put_nowait(ServerEvent(kind, data, now))
        except ConnectionClosed:
            pass
        finally:
            self._queue.put_nowait(None)

    async def _interrupted(self, now_ns: int) -> None:
        """The caller talks over the reply: playback stops; the server learns what was heard."""
        cut = self.playback.interrupt(now_ns)
        if cut is None or not self.auto_truncate:
            return
        item_id, played_ms = cut
        event = {"type": "conversation.item.truncate", "item_id": item_id, "content_index": 0,
                 "audio_end_ms": played_ms}
        self.truncations.append(event)
        await self.send(event)

    # --- sending -----------------------------------------------------------------------------------

    async def send(self, event: dict[str, Any]) -> None:
        await self.ws.send(json.dumps(event))

    async def update_session(self, **session: Any) -> ServerEvent:
        self._session_update = session
        if self.tools and "tools" not in session:
            session = {**session, "tools": self.tools.definitions()}
        if self.include and "include" not in session:
            session = {**session, "include": list(self.include)}
        if self.tools.keypad and "sub250" not in session:
            session = {**session, "sub250": {"keypad_tool": self.tools.keypad}}
        await self.send({"type": "session.update", "session": {"type": "realtime", **session}})
        ev = await self.wait_for("session.updated", "error", timeout=10)
        if ev.is_error:
            raise ValueError(ev.data["error"]["message"])
        self.session = ev.data.get("session", {})
        return ev

    async def send_audio(self, pcm16: bytes) -> None:
        """Append PCM16 mono 24 kHz audio to the input buffer."""
        await self.send({"type": "input_audio_buffer.append", "audio": base64.b64encode(pcm16).decode()})
        self.audio_sent_ms += len(pcm16) / 2 / RATE * 1000
        self._sent_log.append((self.audio_sent_ms, time.perf_counter_ns()))
        if len(self._sent_log) > 20_000:
            del self._sent_log[:10_000]

    def sent_at(self, audio_ms: float) -> int | None:
        """perf_counter_ns when the frame holding input position ``audio_ms`` was sent (None if unknown)."""
        for end_ms, ns in self._sent_log:
            if end_ms >= audio_ms:
                return ns
        return None

    async def send_wav(self, path: str, *, realtime: bool = True, speed: float = 1.0, chunk_ms: int = 20,
                       silence_after_ms: int = 1500) -> int:
        """Stream a sound file (any rate; resampled to 24 kHz) in ``chunk_ms`` frames, paced like a
        microphone when ``realtime`` (``speed`` > 1 streams faster); then ``silence_after_ms`` of silence so
        server VAD can end the turn (1.5 s by default: a pause after words that end open, "...from the", ends
        only after ``[vad] hold_open_ms``, 1 s in cpu-base). Returns perf_counter_ns of the last speech frame
        sent."""
        import numpy as np
        import soundfile as sf

        data, rate = sf.read(path, dtype="float32", always_2d=True)
        mono = data.mean(axis=1)
        if rate != RATE:
            import soxr

            mono = soxr.resample(mono, rate, RATE)
        pcm = (np.clip(mono, -1, 1) * 32767).astype("<i2").tobytes()
        return await self.stream_pcm(pcm, realtime=realtime, speed=speed, chunk_ms=chunk_ms,
                                     silence_after_ms=silence_after_ms)

    async def stream_pcm(self, pcm: bytes, *, realtime: bool = True, speed: float = 1.0, chunk_ms: int = 20,
                         silence_after_ms: int = 0) -> int:
        step = RATE * chunk_ms // 1000 * 2
        frames = [pcm[i : i + step] for i in range(0, len(pcm), step)]
        n_speech = len(frames)
        frames += [bytes(step)] * (silence_after_ms // chunk_ms)
        t0 = time.perf_counter()
        last_speech_ns = time.perf_counter_ns()
        for i, frame in enumerate(frames):
            await self.send_audio(frame)
            if i == n_speech - 1:
                last_speech_ns = time.perf_counter_ns()
            if realtime:
                due = t0 + (i + 1) * chunk_ms / 1000 / speed
                delay = due - time.perf_counter()
                if delay > 0:
                    await asyncio.sleep(delay)
        return last_speech_ns

    async def refer(self, target_uri: str) -> str:
        """Hand the phone call this client follows to ``target_uri`` (``sip:…`` or ``tel:+…``): returns the
        carrier's status once it took the transfer; raises ``RuntimeError`` with the server's words otherwise."""
        return (await self._call_request("refer", {"target_uri": target_uri}))["status"]

    async def hangup(self) -> None:
        """End the call this client follows."""
        await self._call_request("hangup", None)

    async def _call_request(self, action: str, body: dict[str, Any] | None) -> dict[str, Any]:
        import aiohttp

        if self.call_id is None:
            raise RuntimeError("this client follows no call (RealtimeClient(call_id=...))")
        parts = urlsplit(self.base_url)
        scheme = "https" if parts.scheme == "wss" else "http"
        url = f"{scheme}://{parts.netloc}/v1/realtime/calls/{quote(self.call_id, safe='')}/{action}"
        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        async with aiohttp.ClientSession() as http, http.post(url, json=body, headers=headers) as resp:
            data = await resp.json(content_type=None) if resp.content_length != 0 else {}
            if resp.status != 200:
                err = (data or {}).get("error") or {}
                raise RuntimeError(f"{action} refused ({resp.status} {err.get('code')}): {err.get('message')}")
            return data or {}

    async def commit(self) -> None:
        await self.send({"type": "input_audio_buffer.commit"})

    async def send_text(self, text: str, *, respond: bool = True) -> None:
        await self.send({"type": "conversation.item.create",
                         "item": {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}})
        if respond:
            await self.send({"type": "response.create"})

    async def cancel_response(self) -> None:
        await self.send({"type": "response.cancel"})

    # --- receiving ---------------------------------------------------------------------------------

    async def next_event(self, timeout: float | None = None) -> ServerEvent:
        """The next event: first those ``wait_for`` passed over, in order, then what arrives."""
        if self._backlog:
            return self._backlog.popleft()
        ev = await asyncio.wait_for(self._queue.get(), timeout)
        if ev is None:
            self._queue.put_nowait(None)
            raise ConnectionLost("the server closed the connection")
        return ev

    async def events(self) -> AsyncIterator[ServerEvent]:
        while True:
            try:
                yield await self.next_event()
            except ConnectionLost:
                return

    async def wait_for(self, *types: str, timeout: float = 30.0) -> ServerEvent:
        """The first event of one of ``types``. The events before it are not thrown away: ``next_event`` (and
        so ``events`` and ``collect_turn``) hands them out first, in order."""
        deadline = time.monotonic() + timeout
        passed: list[ServerEvent] = []
        try:
            while True:
                ev = await self.next_event(timeout=max(0.0, deadline - time.monotonic()))
                if ev.type in types:
                    return ev
                passed.append(ev)
        finally:
            self._backlog.extendleft(reversed(passed))
            while len(self._backlog) > MAX_BACKLOG:
                self._backlog.popleft()
                self.dropped_events += 1

    async def answer_tool_calls(self, response_done: ServerEvent) -> list[ToolRun]:
        """Run the registered tools a ``response.done`` calls, send their outputs and ask for the answer
        (``response.create``). Returns what ran (nothing when the response called no tool)."""
        runs, events = await self.tools.answer(response_done.data)
        for event in events:
            await self.send(event)
        return runs

    async def collect_turn(self, timeout: float = 60.0, *, until_latency: bool = True,
                           run_tools: bool = True) -> TurnResult:
        """Gather one turn's events until ``response.done`` (and its final latency report). With registered
        tools (``run_tools``), a response that calls them is answered (:meth:`answer_tool_calls`) and the
        turn goes on to the response that speaks the result."""
        result = TurnResult()
        deadline = time.monotonic() + timeout
        done = False
        tool_response = None
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"turn not finished after {timeout} s (status {result.status!r})")
            try:
                ev = await self.next_event(timeout=remaining if not done else min(remaining, 2.0))
            except TimeoutError:
                if done:
                    return result  # no latency report followed (e.g. an empty transcript)
                raise
            result.absorb(ev)
            if ev.type == "response.done" and run_tools and self.tools and ToolSet.calls(ev.data):
                result.tool_runs += await self.answer_tool_calls(ev)
                tool_response = ev.data["response"]["id"]
                continue
            if ev.type == "sub250.turn.latency" and result.tool_runs and ev.data.get("response_id") == tool_response:
                result.tool_latency, result.latency = result.latency, None
                continue
            if ev.type == "response.done":
                done = True
                if not until_latency:
                    return result
            elif ev.type == "sub250.turn.latency" and result.latency is not None and result.latency.final and done:
                return result
