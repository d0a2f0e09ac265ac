"""RealtimeSession: the turn loop of one conversation.

audio in -> 24->16 kHz -> Silero VAD -> endpointing -> (partial ASR while speaking) -> commit
-> final ASR -> retrieval -> prompt -> vLLM stream -> text deltas -> sentence chunker -> Piper
-> 22.05->24 kHz -> audio deltas. Barge-in (speech during a reply) cancels the reply at once.

Every mark of LATENCY.md is taken here, at the moment it names; the transport reports when an event
was actually written (``on_sent``), which gives ``first_token_sent`` and ``first_audio_sent``.
CPU-heavy work (VAD, ASR, TTS, resampling, embedding) runs in threads, never on the event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from app.audio.endpointing import WINDOW_MS, Endpointer, SpeechPaused, SpeechResumed, SpeechStarted, SpeechStopped
from app.audio.pcm import StreamResampler, float32_to_pcm16, pcm16_to_float32
from app.audio.vad import WINDOW, SileroVAD
from app.errors import Sub250Error
from app.llm import LLMRequest
from app.llm.prompt import build_messages
from app.metrics import prometheus
from app.metrics.timeline import TurnTimeline, now_ns
from app.protocol.events import ClientEvent, ProtocolError, encode_audio, error_event, item_text, new_id, server_event
from app.protocol.session_config import AUDIO_RATE, SessionConfig
from app.rag.query_cache import normalize as normalize_query
from app.tts.chunker import SentenceChunker

log = logging.getLogger(__name__)

ASR_RATE = 16_000
#: Reply audio is sent in deltas of this many ms (small enough to stop quickly on barge-in).
AUDIO_DELTA_MS = 100
#: A partial transcript is attempted after this much new speech.
PARTIAL_EVERY_MS = 700
#: A stable partial transcript is searched ahead of the commit once it has this many words.
MIN_AHEAD_WORDS = 4
#: Most audio the input buffer holds without server VAD (client-committed turns).
MAX_BUFFER_MS = 120_000


class Transport(Protocol):
    def send(self, event: dict[str, Any], *, tag: str | None = None,
             on_sent: Callable[[int], None] | None = None) -> None:
        """Queue an event for the client; ``on_sent(ns)`` runs once it is written to the socket."""

    def purge(self, tag: str) -> int:
        """Drop queued, unsent events carrying ``tag``; return how many."""

    async def measure_rtt(self) -> float | None:
        """Round trip to the client in ms (WebSocket ping/pong), or None."""


@dataclass
class _Turn:
    """The user's side of a turn and its timeline."""

    item_id: str
    timeline: TurnTimeline
    audio_start_ms: int = 0
    audio_end_ms: int = 0
    transcript: str | None = None
    #: Partial transcripts of this turn, and how long the retrieval run ahead on a stable one took (ms).
    partials: list[str] = field(default_factory=list)
    prefetch_ms: float | None = None


@dataclass
class _Response:
    id: str
    item_id: str
    turn: _Turn
    task: asyncio.Task | None = None
    text_sent: str = ""
    audio_sent_ms: float = 0.0
    status: str = "in_progress"
    sources: list[dict[str, Any]] = field(default_factory=list)
    #: Speculative reply (started at the first pause): its events are held until the commit adopts it.
    speculative: bool = False
    held: list[tuple[dict[str, Any], Callable[[int], None] | None]] | None = None
    discarded: bool = False
    started_ns: int = 0
    #: Speculative ASR result, published when the turn is committed.
    transcript: str | None = None
    #: Work to do once adopted (the final latency report of a reply that finished before the commit).
    after_adopt: Callable[[], None] | None = None
    #: Reply audio handed to the transport (ms), and whether the final latency report waits for its first
    #: frame to leave (a media track plays audio in real time, so generation can finish first).
    audio_queued_ms: float = 0.0
    report_on_first_audio: bool = False


class Shared:
    """Engines shared by every session (one per process), with the locks that keep CPUs sane."""

    def __init__(self, stack: Any) -> None:
        self.stack = stack
        # One Whisper call at a time: partials skip when busy, finals wait.
        self.asr_lock = asyncio.Lock()


class RealtimeSession:
    def __init__(self, shared: Shared, transport: Transport, *, config: SessionConfig | None = None,
                 model: str | None = None) -> None:
        """``model``: the name the client asked for (``?model=``); default: the profile's served name."""
        self.shared = shared
        self.stack = shared.stack
        self.transport = transport
        self.config = config or SessionConfig(id=new_id("sess"), model=model or self._model_name())
        self.history: list[dict[str, Any]] = []  # conversation items (dicts as on the wire, plus "text")
        self._resampler = StreamResampler(AUDIO_RATE, ASR_RATE)
        self._vad = SileroVAD(self.stack.vad_session, threshold=self._td_threshold())
        self._endpointer = self._new_endpointer()
        self._pending16 = np.zeros(0, dtype=np.float32)
        # The input buffer, in 32 ms windows at 16 kHz; window indices are absolute (since the session began).
        self._windows: list[np.ndarray] = []
        self._window_arrival: list[int] = []      # arrival (ns) of the frame that completed each window
        self._win0 = 0                            # absolute index of self._windows[0]
        self._turn_first = 0                      # absolute index where the current turn's audio starts
        self._turn: _Turn | None = None
        self._response: _Response | None = None
        self._partial_task: asyncio.Task | None = None
        self._last_partial_window = 0
        self._closed = False
        self._tasks: set[asyncio.Task] = set()  # everything this session started: close() stops it all
        self._gateway_ms: float | None = None
        self.counters = {"turns": 0, "cancelled": 0, "errors": 0,
                         "speculative_started": 0, "speculative_adopted": 0, "speculative_discarded": 0}

    # --- set-up ------------------------------------------------------------------------------------

    def _model_name(self) -> str:
        return str(self.stack.profile.stage("llm").get("served_name", "sub250"))

    def _td_threshold(self) -> float:
        return self.config.turn_detection.threshold if self.config.turn_detection else 0.5

    def _new_endpointer(self) -> Endpointer:
        td = self.config.turn_detection
        pause = int(self.stack.profile.stage("vad").get("speculate_after_ms", 64)) or 64
        return Endpointer(td.threshold if td else 0.5, td.silence_duration_ms if td else 500, pause_ms=pause)

    def _speculation_on(self) -> bool:
        if self.config.speculative_turns is not None:
            return self.config.speculative_turns
        return int(self.stack.profile.stage("vad").get("speculate_after_ms", 64)) > 0

    def start(self) -> None:
        self.transport.send(server_event("session.created", session=self.config.to_wire()))

    def _spawn(self, coro: Any) -> asyncio.Task:
        """Run ``coro`` as a task the session owns: a strong reference is kept (the loop holds only weak
        ones), failures are logged, and ``close()`` cancels it."""
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        task.add_done_callback(_log_task_error)
        return task

    async def _transcribe(self, audio: np.ndarray, window: str | None = None) -> str:
        """One ASR call, in a thread, under the process-wide ASR lock."""
        async with self.shared.asr_lock:
            tr = await asyncio.to_thread(self.stack.asr.transcribe, audio, window=window)
        return tr.text

    # --- events in ---------------------------------------------------------------------------------

    async def handle(self, event: ClientEvent, received_ns: int) -> None:
        """Dispatch one parsed client event. ``received_ns``: when its frame was read off the socket."""
        self._gateway_ms = (now_ns() - received_ns) / 1e6
        try:
            handler = getattr(self, "_on_" + event.type.replace(".", "_"))
            await handler(event, received_ns)
        except ProtocolError as err:
            if err.event_id is None:
                err.event_id = event.event_id
            self.error(err)

    async def handle_audio(self, samples16: np.ndarray, received_ns: int) -> None:
        """Caller audio from a media track (WebRTC): the same path as ``input_audio_buffer.append``."""
        self._gateway_ms = (now_ns() - received_ns) / 1e6
        try:
            await self.ingest_audio(samples16, received_ns)
        except ProtocolError as err:
            self.error(err)

    def error(self, err: ProtocolError) -> None:
        self.counters["errors"] += 1
        self.transport.send(error_event(err))

    async def _on_session_update(self, event: ClientEvent, received_ns: int) -> None:
        self.config = self.config.updated(event.data["session"], event.event_id)
        self._vad.threshold = self._td_threshold()
        if not self._endpointer.speaking:
            self._endpointer = self._new_endpointer()
        self.transport.send(server_event("session.updated", session=self.config.to_wire()))

    async def _on_input_audio_buffer_append(self, event: ClientEvent, received_ns: int) -> None:
        samples24 = pcm16_to_float32(event.audio)
        samples16 = await asyncio.to_thread(self._resampler.process, samples24)
        await self.ingest_audio(samples16, received_ns)

    async def ingest_audio(self, samples16: np.ndarray, received_ns: int) -> None:
        """Caller audio at 16 kHz (float32 mono), however it arrived: ``input_audio_buffer.append``
        events, or a WebRTC media track (decoded and resampled at the transport's edge)."""
        buf = np.concatenate([self._pending16, samples16]) if self._pending16.size else samples16
        n = buf.size // WINDOW
        windows = [buf[i * WINDOW : (i + 1) * WINDOW] for i in range(n)]
        self._pending16 = buf[n * WINDOW :].copy()
        if not windows:
            return
        td = self.config.turn_detection
        if td is None:
            if (len(self._windows) + len(windows)) * WINDOW_MS > MAX_BUFFER_MS:
                raise ProtocolError("input_audio_buffer_full",
                                    f"the input buffer holds at most {MAX_BUFFER_MS // 1000} s: commit or clear it")
            self._windows.extend(windows)
            self._window_arrival.extend([received_ns] * len(windows))
            return
        probs = await asyncio.to_thread(lambda: [self._vad.probability(w) for w in windows])
        for w, p in zip(windows, probs):
            index = self._win0 + len(self._windows)
            self._windows.append(w)
            self._window_arrival.append(received_ns)
            decision = self._endpointer.push(p, index)
            if isinstance(decision, SpeechStarted):
                self._on_speech_started(decision.window)
            elif isinstance(decision, SpeechStopped):
                await self._on_speech_stopped(decision.window)
            elif isinstance(decision, SpeechPaused):
                self._on_speech_paused(decision.window)
            elif isinstance(decision, SpeechResumed):
                self._on_speech_resumed()
        if self._endpointer.speaking and self._turn is not None:
            self._maybe_partial()
        elif self._turn is None:
            # Idle: keep only what prefix padding may need.
            keep = int(td.prefix_padding_ms / WINDOW_MS) + 2
            drop = len(self._windows) - keep
            if drop > 0:
                del self._windows[:drop], self._window_arrival[:drop]
                self._win0 += drop

    @staticmethod
    def _window_ms(window: int) -> int:
        return int(window * WINDOW_MS)

    def _arrival(self, window: int) -> int:
        return self._window_arrival[window - self._win0]

    def _on_speech_started(self, window: int) -> None:
        item_id = new_id("item")
        tl = TurnTimeline(turn_id=item_id)
        tl.mark("speech_start", self._arrival(window))
        td = self.config.turn_detection
        pad = int((td.prefix_padding_ms if td else 300) / WINDOW_MS)
        self._turn_first = max(self._win0, window - pad)
        self._turn = _Turn(item_id=item_id, timeline=tl, audio_start_ms=self._window_ms(self._turn_first))
        self._last_partial_window = window
        self.transport.send(server_event("input_audio_buffer.speech_started",
                                         audio_start_ms=self._window_ms(window), item_id=item_id))
        # Barge-in: the caller talks over the reply.
        if self._response is not None and (td is None or td.interrupt_response):
            self._cancel_response("turn_detected")
        self._spawn(self._measure_rtt(tl))

    async def _measure_rtt(self, tl: TurnTimeline) -> None:
        rtt = await self.transport.measure_rtt()
        if rtt is not None:
            tl.measured["network_rtt"] = rtt

    def _on_speech_paused(self, last_window: int) -> None:
        """The first silence after speech: prepare the reply now, hold it until the commit (or drop it)."""
        td = self.config.turn_detection
        turn = self._turn
        if turn is None or td is None or not td.create_response or not self._speculation_on():
            return
        if self._response is not None:  # a reply is still running (interrupt_response off): leave it be
            return
        start = max(0, self._turn_first - self._win0)
        audio = np.concatenate(self._windows[start : last_window - self._win0 + 1])
        resp = _Response(id=new_id("resp"), item_id=new_id("item"), turn=turn, speculative=True, held=[],
                         started_ns=now_ns())
        self._response = resp
        self.counters["speculative_started"] += 1
        prometheus.SPECULATIVE.labels(outcome="started").inc()
        resp.task = self._spawn(self._run_response(resp, audio, {}))

    def _on_speech_resumed(self) -> None:
        resp = self._response
        if resp is not None and resp.speculative and resp.held is not None:
            self._discard(resp)

    def _discard(self, resp: _Response) -> None:
        """The caller went on speaking: throw the speculative reply away; nothing of it was sent."""
        resp.discarded = True
        resp.status = "discarded"
        resp.held = []
        self.counters["speculative_discarded"] += 1
        prometheus.SPECULATIVE.labels(outcome="discarded").inc()
        if self._response is resp:
            self._response = None
        if resp.task is not None and not resp.task.done():
            resp.task.cancel()

    def _adopt(self, resp: _Response, commit_ns: int) -> None:
        """The turn is committed as it was at the pause: the speculative reply becomes the reply."""
        tl = resp.turn.timeline
        tl.speculative = True
        marks = tl.marks
        # Work done before the commit is off the critical path: reported apart (ahead), never as a negative span.
        if "asr_final" in marks and marks["asr_final"] < commit_ns:
            tl.ahead["asr"] = (marks["asr_final"] - resp.started_ns) / 1e6
            tl.mark("asr_final", commit_ns, overwrite=True)
        if "retrieval_start" in marks and marks["retrieval_start"] < commit_ns:
            end = marks.get("retrieval_end")
            if end is not None and end <= commit_ns:
                tl.measured["retrieval_ahead"] = (end - marks["retrieval_start"]) / 1e6
                tl.unmark("retrieval_start")
                tl.unmark("retrieval_end")
            else:
                tl.measured["retrieval_ahead"] = (commit_ns - marks["retrieval_start"]) / 1e6
                tl.mark("retrieval_start", commit_ns, overwrite=True)
        if "prompt_ready" in marks and marks["prompt_ready"] < commit_ns:
            tl.ahead["prompt_ready"] = (marks["prompt_ready"] - resp.started_ns) / 1e6
            tl.mark("prompt_ready", commit_ns, overwrite=True)
        self.counters["speculative_adopted"] += 1
        prometheus.SPECULATIVE.labels(outcome="adopted").inc()
        held, resp.held = resp.held or [], None
        # Same order as a reply started at the commit: response.created, the transcript, then the rest.
        if held and held[0][0]["type"] == "response.created":
            self.transport.send(held[0][0], tag=resp.id, on_sent=held[0][1])
            held = held[1:]
        if resp.transcript is not None:
            self._publish_transcript(resp.turn, resp.transcript)
        for event, on_sent in held:
            self.transport.send(event, tag=resp.id, on_sent=on_sent)
        if resp.after_adopt is not None:
            resp.after_adopt()

    async def _on_speech_stopped(self, last_window: int) -> None:
        turn = self._turn
        if turn is None:
            return
        commit_ns = now_ns()  # the server decides the user's turn is over
        turn.timeline.mark("speech_end", self._arrival(last_window))
        turn.audio_end_ms = self._window_ms(last_window + 1)
        self.transport.send(server_event("input_audio_buffer.speech_stopped", audio_end_ms=turn.audio_end_ms,
                                         item_id=turn.item_id))
        audio = self._take_audio(self._turn_first)
        await self._commit(turn, audio, commit_ns)

    def _take_audio(self, first: int | None = None) -> np.ndarray:
        """The buffer's audio from absolute window ``first`` (None: nothing); the buffer is emptied."""
        start = 0 if first is None else max(0, first - self._win0)
        parts = self._windows[start:] if first is not None else []
        audio = np.concatenate(parts) if parts else np.zeros(0, dtype=np.float32)
        self._win0 += len(self._windows)
        self._windows.clear()
        self._window_arrival.clear()
        return audio

    async def _on_input_audio_buffer_commit(self, event: ClientEvent, received_ns: int) -> None:
        if not self._windows and not self._pending16.size:
            raise ProtocolError("input_audio_buffer_commit_empty", "the input audio buffer is empty",
                                event_id=event.event_id)
        if self._turn is not None:
            turn, first = self._turn, self._turn_first
        else:
            item_id = new_id("item")
            turn, first = _Turn(item_id=item_id, timeline=TurnTimeline(turn_id=item_id)), self._win0
            turn.audio_start_ms = self._window_ms(first)
        if self._pending16.size:
            self._windows.append(np.pad(self._pending16, (0, WINDOW - self._pending16.size)))
            self._window_arrival.append(received_ns)
            self._pending16 = np.zeros(0, dtype=np.float32)
        if not turn.timeline.has("speech_end"):
            turn.timeline.mark("speech_end", self._window_arrival[-1])
        turn.audio_end_ms = self._window_ms(self._win0 + len(self._windows))
        audio = self._take_audio(first)
        self._endpointer.reset()
        await self._commit(turn, audio, received_ns, manual=True)

    async def _commit(self, turn: _Turn, audio: np.ndarray, commit_ns: int, manual: bool = False) -> None:
        self._turn = None
        tl = turn.timeline
        tl.mark("turn_commit", commit_ns)
        if self._gateway_ms is not None:
            tl.measured["gateway"] = self._gateway_ms
        if self._partial_task is not None:
            self._partial_task.cancel()
            self._partial_task = None
        previous = self.history[-1]["id"] if self.history else None
        self.transport.send(server_event("input_audio_buffer.committed", previous_item_id=previous,
                                         item_id=turn.item_id))
        item = {"id": turn.item_id, "type": "message", "object": "realtime.item", "role": "user",
                "status": "completed", "content": [{"type": "input_audio", "transcript": None}]}
        self.history.append({**item, "text": ""})
        self.transport.send(server_event("conversation.item.added", previous_item_id=previous, item=item))
        create = manual is False and (self.config.turn_detection is None or self.config.turn_detection.create_response)
        self.counters["turns"] += 1
        resp = self._response
        if resp is not None and resp.speculative and not resp.discarded and resp.turn is turn and resp.held is not None:
            self._adopt(resp, commit_ns)
            return
        self._spawn(self._transcribe_and_maybe_respond(turn, audio, create))

    async def _transcribe_and_maybe_respond(self, turn: _Turn, audio: np.ndarray, create: bool) -> None:
        tl = turn.timeline
        if create:
            # The response starts now: ASR is its first stage (and on its critical path).
            await self._start_response(turn, audio=audio)
            return
        text = await self._final_asr(turn, audio)
        tl.mark("asr_final")
        self._publish_transcript(turn, text)

    async def _final_asr(self, turn: _Turn, audio: np.ndarray) -> str:
        if audio.size < WINDOW:
            return ""
        return await self._transcribe(audio)

    def _publish_transcript(self, turn: _Turn, text: str) -> None:
        turn.transcript = text
        for it in self.history:
            if it["id"] == turn.item_id:
                it["text"] = text
                it["content"] = [{"type": "input_audio", "transcript": text}]
                item = {k: v for k, v in it.items() if k != "text"}
                break
        else:
            return
        self.transport.send(server_event("conversation.item.input_audio_transcription.completed",
                                         item_id=turn.item_id, content_index=0, transcript=text,
                                         usage={"type": "duration", "seconds": turn.audio_end_ms / 1000}))
        self.transport.send(server_event("conversation.item.done", item=item))

    def _maybe_partial(self) -> None:
        """Partial transcript of the speech so far, at most one at a time, skipped when ASR is busy."""
        if self._partial_task is not None or self.shared.asr_lock.locked() or not self.config.transcription:
            return
        if self._response is not None and self._response.speculative:
            return  # a speculative reply is transcribing already
        if not self.stack.profile.stage("asr").get("partials", True):
            return
        end = self._win0 + len(self._windows)
        if (end - self._last_partial_window) * WINDOW_MS < PARTIAL_EVERY_MS:
            return
        self._last_partial_window = end
        turn = self._turn
        audio = np.concatenate(self._windows[max(0, self._turn_first - self._win0) :])

        async def run() -> None:
            try:
                # A partial is replaced by the final transcript: the fast cut window keeps the lock short,
                # so a final (or a speculative reply's) ASR call never waits long behind it.
                text = await self._transcribe(audio, self.stack.profile.stage("asr").get("partial_window", "audio"))
                if self._turn is turn and text:
                    self.transport.send(server_event("sub250.transcript.partial", item_id=turn.item_id,
                                                     text=text, audio_ms=int(audio.size / 16)))
                    self._retrieve_ahead(turn, text)
            finally:
                self._partial_task = None

        self._partial_task = self._spawn(run())

    def _retrieve_ahead(self, turn: _Turn, text: str) -> None:
        """Retrieval ahead of the commit: once a partial transcript is stable (it repeats the previous one
        and grows it, with enough words to search on), search with it in the background. The result lands
        in the query cache; the committed question reuses it when it is the same or near enough (the
        measured threshold, see app/rag/query_cache.py), else searches again."""
        previous = turn.partials[-1] if turn.partials else None
        turn.partials.append(text)
        retriever = self.stack.retriever
        if retriever is None or retriever.cache is None or previous is None:
            return
        now, before = normalize_query(text), normalize_query(previous)
        if len(now.split()) < MIN_AHEAD_WORDS or not now.startswith(before):
            return

        async def run() -> None:
            t0 = now_ns()
            try:
                await retriever.retrieve(text, count=False)
            except Exception as exc:  # ahead of time only: the commit will search (and report) again
                log.debug("retrieval ahead failed: %s", exc)
                return
            turn.prefetch_ms = (now_ns() - t0) / 1e6

        self._spawn(run())

    async def _on_input_audio_buffer_clear(self, event: ClientEvent, received_ns: int) -> None:
        self._take_audio(None)
        self._pending16 = np.zeros(0, dtype=np.float32)
        self._endpointer.reset()
        self._turn = None
        self.transport.send(server_event("input_audio_buffer.cleared"))

    async def _on_conversation_item_create(self, event: ClientEvent, received_ns: int) -> None:
        src = event.data["item"]
        item_id = src.get("id") if isinstance(src.get("id"), str) else new_id("item")
        text = item_text(src)
        item = {"id": item_id, "type": "message", "object": "realtime.item", "role": src["role"],
                "status": "completed", "content": [{"type": "input_text", "text": text}]}
        previous = self.history[-1]["id"] if self.history else None
        self.history.append({**item, "text": text})
        self.transport.send(server_event("conversation.item.added", previous_item_id=previous, item=item))
        self.transport.send(server_event("conversation.item.done", previous_item_id=previous, item=item))

    async def _on_conversation_item_delete(self, event: ClientEvent, received_ns: int) -> None:
        item_id = event.data["item_id"]
        before = len(self.history)
        self.history = [it for it in self.history if it["id"] != item_id]
        if len(self.history) == before:
            raise ProtocolError("item_not_found", f"no item {item_id!r} in the conversation", param="item_id")
        self.transport.send(server_event("conversation.item.deleted", item_id=item_id))

    async def _on_conversation_item_truncate(self, event: ClientEvent, received_ns: int) -> None:
        """The client says how much of an assistant item's audio was played: cut the text to match."""
        item_id, end_ms = event.data["item_id"], event.data["audio_end_ms"]
        for it in self.history:
            if it["id"] == item_id and it["role"] == "assistant":
                words = it["text"].split()
                spoken_ms = max(1.0, it.get("audio_ms", 0.0))
                keep = int(len(words) * min(1.0, end_ms / spoken_ms))
                it["text"] = " ".join(words[:keep])
                self.transport.send(server_event("conversation.item.truncated", item_id=item_id,
                                                 content_index=event.data["content_index"], audio_end_ms=end_ms))
                return
        raise ProtocolError("item_not_found", f"no assistant item {item_id!r} to truncate", param="item_id")

    async def _on_response_create(self, event: ClientEvent, received_ns: int) -> None:
        if self._response is not None:
            raise ProtocolError("conversation_already_has_active_response",
                                "a response is in progress; cancel it first (response.cancel)")
        users = [it for it in self.history if it["role"] == "user" and it["text"]]
        if not users:
            raise ProtocolError("no_user_input", "there is no user message to respond to")
        last = users[-1]
        tl = TurnTimeline(turn_id=last["id"])
        tl.mark("turn_commit", received_ns)  # the client's commit event
        tl.mark("asr_final", received_ns)    # text needs no recognition
        if self._gateway_ms is not None:
            tl.measured["gateway"] = self._gateway_ms
        turn = _Turn(item_id=last["id"], timeline=tl, transcript=last["text"])
        self._spawn(self._measure_rtt(tl))
        overrides = event.data.get("response") or {}
        await self._start_response(turn, overrides=overrides)

    async def _on_response_cancel(self, event: ClientEvent, received_ns: int) -> None:
        rid = event.data.get("response_id")
        if self._response is None or (rid and rid != self._response.id):
            raise ProtocolError("response_not_found", "no response in progress to cancel", param="response_id")
        self._cancel_response("client_cancelled")

    # --- the response ------------------------------------------------------------------------------

    async def _start_response(self, turn: _Turn, *, audio: np.ndarray | None = None,
                              overrides: dict | None = None) -> None:
        if self._response is not None:
            self._cancel_response("turn_detected")
        resp = _Response(id=new_id("resp"), item_id=new_id("item"), turn=turn)
        self._response = resp
        resp.task = self._spawn(self._run_response(resp, audio, overrides or {}))

    def _cancel_response(self, reason: str) -> None:
        resp = self._response
        if resp is None or resp.task is None or resp.task.done():
            return
        resp.status = "cancelled"
        resp.cancel_reason = reason  # type: ignore[attr-defined]
        dropped = self.transport.purge(resp.id)  # unsent deltas of this reply never reach the client
        log.debug("cancel %s (%s): %d queued events dropped", resp.id, reason, dropped)
        resp.task.cancel()

    def _send(self, resp: _Response, event: dict[str, Any], on_sent: Callable[[int], None] | None = None) -> None:
        if resp.discarded:
            return
        if resp.held is not None:  # speculative and not yet adopted: nothing reaches the client
            resp.held.append((event, on_sent))
            return
        self.transport.send(event, tag=resp.id, on_sent=on_sent)

    async def _run_response(self, resp: _Response, audio: np.ndarray | None, overrides: dict) -> None:
        turn, tl = resp.turn, resp.turn.timeline
        modalities = tuple(overrides.get("output_modalities") or self.config.output_modalities)
        with_audio = "audio" in modalities
        instructions = overrides.get("instructions") or self.config.instructions
        max_tokens = int(overrides.get("max_output_tokens") or self.config.max_output_tokens)
        response_obj = {"id": resp.id, "object": "realtime.response", "status": "in_progress",
                        "output": [], "output_modalities": list(modalities), "conversation_id": self.config.id}
        self._send(resp, server_event("response.created", response=response_obj))
        text_parts: list[str] = []
        audio_queue: asyncio.Queue[str | None] = asyncio.Queue()
        tts_task: asyncio.Task | None = None
        error: Exception | None = None
        engine_request_id = f"{resp.id}-{uuid.uuid4().hex[:6]}"
        try:
            # 1. final transcript
            if audio is not None:
                text = await self._final_asr(turn, audio)
                tl.mark("asr_final")
                if resp.held is not None:  # speculative: published if and when the turn is committed
                    resp.transcript = turn.transcript = text
                else:
                    self._publish_transcript(turn, text)
                if not text.strip():
                    resp.status = "completed"
                    return
            question = turn.transcript or ""
            # 2. retrieval (critical path)
            passages: list[Any] = []
            tl.mark("retrieval_start")
            try:
                if self.stack.retriever is None:
                    raise Sub250Error("no retriever")
                r = await self.stack.retriever.retrieve(question)
                passages = r.passages
                tl.retrieval_cache = r.cache
                if r.cache in ("exact", "near") and turn.prefetch_ms is not None and "retrieval_ahead" not in tl.measured:
                    tl.measured["retrieval_ahead"] = turn.prefetch_ms  # the search was done on a partial
            except Exception as exc:  # a dead database must not end the conversation
                self.transport.send(error_event(ProtocolError(
                    "retrieval_unavailable", f"knowledge base unavailable, answering without it: {exc}",
                    type="server_error")))
            tl.mark("retrieval_end")
            resp.sources = [p.as_source() for p in passages]
            self._send(resp, server_event("sub250.sources", response_id=resp.id, item_id=turn.item_id,
                                          sources=resp.sources))
            # 3. prompt
            history = [{"role": it["role"], "content": it["text"]} for it in self.history
                       if it["id"] != turn.item_id and it["text"] and it["role"] in ("user", "assistant")]
            llm_cfg = self.stack.profile.stage("llm")
            messages = build_messages(instructions, question, passages, history, self.stack.llm.count_tokens,
                                      passage_tokens=int(llm_cfg.get("context_tokens", 350)),
                                      history_tokens=int(llm_cfg.get("history_tokens", 384)))
            prompt_ids = self.stack.llm.tokenize(messages)
            tl.mark("prompt_ready")
            # 4. output item
            content_type = "output_audio" if with_audio else "output_text"
            item = {"id": resp.item_id, "type": "message", "object": "realtime.item", "role": "assistant",
                    "status": "in_progress", "content": []}
            previous = self.history[-1]["id"] if self.history else None
            self._send(resp, server_event("response.output_item.added", response_id=resp.id, output_index=0,
                                          item=item))
            self._send(resp, server_event("conversation.item.added", previous_item_id=previous, item=item))
            self._send(resp, server_event("response.content_part.added", response_id=resp.id,
                                          item_id=resp.item_id, output_index=0, content_index=0,
                                          part={"type": content_type, "transcript" if with_audio else "text": ""}))
            if with_audio:
                tts_task = asyncio.ensure_future(self._tts_worker(resp, audio_queue))
            chunker = SentenceChunker(first_clause=bool(self.stack.profile.stage("tts").get("first_clause", True)))
            delta_type = "response.output_audio_transcript.delta" if with_audio else "response.output_text.delta"
            # 5. generate
            tl.mark("llm_submit")
            req = LLMRequest(engine_request_id, messages, max_tokens=max_tokens, prompt_token_ids=prompt_ids or None)
            async for d in self.stack.llm.stream(req):
                tl.tokens = d.num_tokens
                if d.spec_decoding is not None:
                    tl.spec = d.spec_decoding
                if d.prompt_tokens is not None and tl.prompt_tokens is None:
                    tl.prompt_tokens, tl.cached_prompt_tokens = d.prompt_tokens, d.cached_prompt_tokens
                if not d.text:
                    continue
                tl.mark("first_token")
                text_parts.append(d.text)
                self._send(resp, server_event(delta_type, response_id=resp.id, item_id=resp.item_id,
                                              output_index=0, content_index=0, delta=d.text),
                           on_sent=self._text_sent(resp, d.text))
                if with_audio:
                    for sentence in chunker.push(d.text):
                        audio_queue.put_nowait(sentence)
            if with_audio:
                for sentence in chunker.flush():
                    audio_queue.put_nowait(sentence)
                audio_queue.put_nowait(None)
                await tts_task
            resp.status = "completed"
        except asyncio.CancelledError:
            resp.status = "cancelled"
        except Exception as exc:
            resp.status = "failed"
            error = exc
            log.exception("response %s failed", resp.id)
        finally:
            if tts_task is not None and not tts_task.done():
                tts_task.cancel()
            if resp.status == "cancelled":
                self.counters["cancelled"] += 1
                with contextlib.suppress(Exception):
                    await self.stack.llm.abort(engine_request_id)
            self._finish_response(resp, "".join(text_parts), with_audio, error)

    def _text_sent(self, resp: _Response, text: str) -> Callable[[int], None]:
        def done(ns: int) -> None:
            resp.turn.timeline.mark("first_token_sent", ns)
            resp.text_sent += text

        return done

    async def _tts_worker(self, resp: _Response, queue: asyncio.Queue[str | None]) -> None:
        tl = resp.turn.timeline
        tts = self.stack.tts
        out_rs = StreamResampler(tts.sample_rate, AUDIO_RATE)
        per_delta = int(AUDIO_RATE * AUDIO_DELTA_MS / 1000)
        while (sentence := await queue.get()) is not None:
            chunks = await asyncio.to_thread(lambda s=sentence: list(tts.synthesize(s)))
            tl.mark("first_audio")
            for chunk in chunks:
                pcm24 = await asyncio.to_thread(
                    lambda c=chunk: float32_to_pcm16(out_rs.process(pcm16_to_float32(c.pcm16))))
                view = memoryview(pcm24)
                step = per_delta * 2
                for i in range(0, len(view), step):
                    part = view[i : i + step]
                    ms = len(part) / 2 / AUDIO_RATE * 1000
                    resp.audio_queued_ms += ms
                    self._send(resp, server_event("response.output_audio.delta", response_id=resp.id,
                                                  item_id=resp.item_id, output_index=0, content_index=0,
                                                  delta=encode_audio(part)),
                               on_sent=self._audio_sent(resp, ms))

    def _audio_sent(self, resp: _Response, ms: float) -> Callable[[int], None]:
        def done(ns: int) -> None:
            tl = resp.turn.timeline
            first = not tl.has("first_audio_sent")
            tl.mark("first_audio_sent", ns)
            resp.audio_sent_ms += ms
            if first:  # the first latency report, as soon as the caller can hear something
                final = resp.report_on_first_audio
                self.transport.send(server_event("sub250.turn.latency", response_id=resp.id,
                                                 **tl.report(final=final)))
                if final:
                    prometheus.observe(tl)

        return done

    def _finish_response(self, resp: _Response, text: str, with_audio: bool, error: Exception | None) -> None:
        if resp.discarded:
            return  # thrown away before the commit: no events, no history
        if resp.held is not None:
            # A speculative reply finished before the commit: finish it for the client once adopted.
            resp.after_adopt = lambda: self._finish_response(resp, text, with_audio, error)
            return
        tl = resp.turn.timeline
        tl.mark("response_done")
        tl.outcome = resp.status
        if self._response is resp:
            self._response = None
        # History keeps what the caller actually got: everything on completion, what was sent on cancel.
        kept = text if resp.status == "completed" else resp.text_sent
        status_item = "completed" if resp.status == "completed" else "incomplete"
        part = ({"type": "output_audio", "transcript": kept} if with_audio else {"type": "output_text", "text": kept})
        item = {"id": resp.item_id, "type": "message", "object": "realtime.item", "role": "assistant",
                "status": status_item, "content": [part]}
        if kept or resp.status == "completed":
            self.history.append({**item, "text": kept, "audio_ms": resp.audio_sent_ms})
        if resp.status == "completed" and (text or with_audio):
            if with_audio:
                self.transport.send(server_event("response.output_audio.done", response_id=resp.id,
                                                 item_id=resp.item_id, output_index=0, content_index=0))
                self.transport.send(server_event("response.output_audio_transcript.done", response_id=resp.id,
                                                 item_id=resp.item_id, output_index=0, content_index=0,
                                                 transcript=text))
            else:
                self.transport.send(server_event("response.output_text.done", response_id=resp.id,
                                                 item_id=resp.item_id, output_index=0, content_index=0, text=text))
            self.transport.send(server_event("response.content_part.done", response_id=resp.id, item_id=resp.item_id,
                                             output_index=0, content_index=0, part=part))
            self.transport.send(server_event("response.output_item.done", response_id=resp.id, output_index=0,
                                             item=item))
            self.transport.send(server_event("conversation.item.done", item=item))
        if error is not None:
            msg = str(error) if isinstance(error, Sub250Error) else f"{type(error).__name__}: {error}"
            self.transport.send(error_event(ProtocolError("response_failed", f"the response failed: {msg}",
                                                          type="server_error")))
        details = None
        if resp.status == "cancelled":
            details = {"type": "cancelled", "reason": getattr(resp, "cancel_reason", "client_cancelled")}
        elif resp.status == "failed":
            details = {"type": "failed", "error": {"type": "server_error", "message": str(error)}}
        self.transport.send(server_event("response.done", response={
            "id": resp.id, "object": "realtime.response", "status": resp.status, "status_details": details,
            "output": [item] if (kept or resp.status == "completed") else [],
            "conversation_id": self.config.id,
            "usage": {"output_tokens": tl.tokens, "total_tokens": tl.tokens},
        }))
        if not tl.has("llm_submit"):
            return
        if resp.status == "completed" and resp.audio_queued_ms and not tl.has("first_audio_sent"):
            resp.report_on_first_audio = True  # its audio is still queued (WebRTC): report once it plays
            return
        self.transport.send(server_event("sub250.turn.latency", response_id=resp.id, **tl.report(final=True)))
        prometheus.observe(tl)

    # --- teardown ----------------------------------------------------------------------------------

    async def close(self) -> None:
        """The connection is gone: stop everything this session started."""
        self._closed = True
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()  # replies (aborting their engine requests), transcriptions, partials, RTT probes
        await asyncio.gather(*tasks, return_exceptions=True)


def _log_task_error(task: asyncio.Task) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.error("session task failed", exc_info=task.exception())

