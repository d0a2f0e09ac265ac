"""RealtimeSession: the conductor of one conversation.

It routes client events through an explicit handler table, feeds caller audio through the input buffer, Silero
VAD and the endpointer, and wires the parts - listening (partials, retrieval ahead), speculation (the reply
held at the first pause), the interruption check (speech over a reply: words, or a cough?), the
conversation, and each :class:`~sub250.session.reply.Reply` - to the stack's engines. It is the only place stages are wired; the parts never call back into it. Wire shapes come from
:mod:`app.protocol.server_events`; CPU-heavy work runs on the engines' threads, never on the event loop.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import numpy as np

from sub250 import logs
from sub250.asr.base import Need
from sub250.audio.endpointing import WINDOW_MS, SpeechPaused, SpeechResumed, SpeechStarted, SpeechStopped
from sub250.audio.smart_turn import N_SAMPLES as SMART_TURN_SAMPLES
from sub250.audio.vad import WINDOW
from sub250.metrics.timeline import now_ns
from sub250.protocol import server_events as ev
from sub250.protocol.events import ClientEvent, ProtocolError, new_id
from sub250.protocol.session_config import SessionConfig
from sub250.session import items, stages
from sub250.session.arbiter import Check, Confirm, Decision, Dismiss, InterruptionArbiter, Resume
from sub250.session.conversation import Conversation, Item
from sub250.session.idle import IdleTimer, nudge_after
from sub250.session.input_buffer import MAX_BUFFER_MS, InputBuffer
from sub250.session.interruption import InterruptionCheck
from sub250.session.listening import Listening
from sub250.session.output import AsConfigured, ReplyOutput, Transport
from sub250.session.pauses import Decision as PauseDecision
from sub250.session.pauses import EndTurn, HoldOn, Pause, PausePolicy, Settle
from sub250.session.reply import Reply, ReplyOptions, ReplyState
from sub250.session.speculation import Speculation
from sub250.session.stats import SessionStats
from sub250.session.tuning import PipelineTuning
from sub250.session.turn import UserTurn
from sub250.session.turn_detection import TurnDetector
from sub250.session.turn_words import TurnWords
from sub250.tasks import TaskSet

log = logging.getLogger(__name__)

Handler = Callable[[ClientEvent, int], Awaitable[None]]


class RealtimeSession:
    def __init__(self, stack: Any, transport: Transport, *, config: SessionConfig | None = None,
                 model: str | None = None) -> None:
        """``stack``: the engines (:class:`app.stack.Stack`); ``model``: the name the client asked for
        (``?model=``), default the profile's served name."""
        self.stack = stack
        self.tuning = PipelineTuning.from_profile(stack.profile, getattr(stack, "about", None))
        self.config = config or SessionConfig(id=new_id("sess"), model=model or self.tuning.served_name,
                                              instructions=self.tuning.instructions)
        #: Everything leaves through here, as the client configured it (``include``, the output format).
        self.transport: AsConfigured = AsConfigured(transport, lambda: self.config)
        self.conversation = Conversation()
        self.stats = SessionStats(session_id=self.config.id)
        self.input = InputBuffer()
        self.tasks = TaskSet()
        self.speculation = Speculation()
        self.listening = Listening(stack.asr, stack.retriever, window=self.tuning.partial_window,
                                   send=self.transport.send, spawn=self.tasks.spawn)
        self.detector = TurnDetector(stack.vad_session, self.config.turn_detection,
                                     pause_ms=self.tuning.speculate_after_ms or 64)
        self._turn: UserTurn | None = None
        self._reply: Reply | None = None
        turn_words = None if not self.tuning.finished_commit_ms or getattr(stack, "llm", None) is None else \
            TurnWords(stack.llm, self.tuning.finished_logprob, spawn=self.tasks.spawn,
                      wait_s=max(self.tuning.hold_open_ms, 500) / 1000)
        #: What a silence in the caller's speech means (hold-open, the reading of words, semantic).
        self.pauses = PausePolicy(lambda: self.tuning, self.detector, self.stats, turn_words)
        #: A suspected interruption of a live reply (paused meanwhile): words, or a cough?
        self.arbiter = InterruptionArbiter()
        self._gateway_ms: float | None = None
        #: Transcriptions of committed turns under way (transcription-only sessions, or create_response false).
        self._transcribing = 0
        #: The idle timer (``turn_detection.idle_timeout_ms``), armed when a response's audio will have played.
        self.idle = IdleTimer()
        #: The key's limits now (``KeyLimiter.rate_limits``), set by the transport: each response begins with
        #: a ``rate_limits.updated``; None (no gateway, e.g. tests): none is sent.
        self.rate_limits: Callable[[], list[dict[str, Any]]] | None = None
        self._handlers: dict[str, Handler] = {  # every client event type this server implements
            "session.update": self._on_session_update, "input_audio_buffer.append": self._on_buffer_append,
            "input_audio_buffer.commit": self._on_buffer_commit, "input_audio_buffer.clear": self._on_buffer_clear,
            "conversation.item.create": self._items(items.create),
            "conversation.item.delete": self._items(items.delete),
            "conversation.item.retrieve": self._items(items.retrieve),
            "conversation.item.truncate": self._items(items.truncate),
            "output_audio_buffer.clear": self._on_output_audio_clear,
            "response.create": self._on_response_create, "response.cancel": self._on_response_cancel}

    @property
    def in_flight(self) -> bool:
        """A turn is under way: the caller is speaking (or a sound over the reply is being checked), a transcript
        is being made, or a reply holds the response slot. A server that drains waits for this to end."""
        return self.reply is not None or self._turn is not None or self.arbiter.active \
            or self._transcribing > 0

    @property
    def reply(self) -> Reply | None:
        """The reply holding the session's one response slot (held or live), if any."""
        return self._reply if self._reply is not None and self._reply.active else None

    def start(self) -> None:
        self.transport.send(ev.session_created(self.config))

    # --- events in -----------------------------------------------------------------------------------

    async def handle(self, event: ClientEvent, received_ns: int) -> None:
        """Dispatch one parsed client event. ``received_ns``: when its frame was read off the socket."""
        self._gateway_ms = (now_ns() - received_ns) / 1e6
        logs.SESSION_ID.set(self.config.id)  # for the rest of the transport's task, and the tasks it starts
        handler = self._handlers.get(event.type)
        if handler is None:
            self.error(ProtocolError("unsupported_event", f"{event.type!r} is not supported by this server",
                                     param="type", event_id=event.event_id))
            return
        await self._guarded(handler(event, received_ns), event.event_id)

    async def handle_audio(self, pcm16: bytes, rate: int, received_ns: int) -> None:
        """Caller audio from a media track (WebRTC), PCM16 mono at ``rate``: the same path as
        ``input_audio_buffer.append``."""
        self._gateway_ms = (now_ns() - received_ns) / 1e6
        logs.SESSION_ID.set(self.config.id)
        await self._guarded(self._ingest(pcm16, rate, received_ns), None)

    async def _guarded(self, work: Awaitable[None], event_id: str | None) -> None:
        """A client mistake gets its ``error``; a fault of ours gets a generic one (details in the log, under
        the id the client sees). Either way the session goes on."""
        try:
            await work
        except ProtocolError as err:
            err.event_id = err.event_id or event_id
            self.error(err)
        except Exception:
            error_id = new_id("err")
            log.exception("session %s: handling an event failed (error id %s)", self.config.id, error_id)
            self.error(ProtocolError("server_error", f"internal error (error id {error_id})", event_id=event_id,
                                     type="server_error"))

    def error(self, err: ProtocolError) -> None:
        self.stats.errors += 1
        self.transport.send(ev.error(err))

    async def _on_session_update(self, event: ClientEvent, received_ns: int) -> None:
        self.configure(event.session or {}, event.event_id)
        self.idle.disarm()  # the next response arms it with the new settings
        self.transport.send(ev.session_updated(self.config))

    def configure(self, session: Any, event_id: str | None = None) -> None:
        """Apply a ``session`` object (``session.update``'s, or the one a WebRTC call or client secret was
        created with); ProtocolError on the first bad field, and then nothing changes."""
        config = self.config.updated(session, event_id)
        td = config.turn_detection
        if td is not None and td.type == "semantic_vad" and getattr(self.stack, "end_of_turn", None) is None:
            raise ProtocolError("invalid_value", "semantic_vad needs an end-of-turn model, and this server's "
                                f"profile {self.stack.profile.name!r} has none ([turn]): use server_vad",
                                param="session.audio.input.turn_detection.type", event_id=event_id)
        self.config = config
        self.listening.prompt = config.transcription_prompt
        self.detector.configure(self.config.turn_detection)
        td = self.config.turn_detection
        if self.arbiter.active and (td is None or not td.interrupt_response):
            self._act([self.arbiter.dismiss()])  # no server VAD, or no interruptions: the reply plays on

    def input_seconds(self, nbytes: int) -> float:
        """How long ``nbytes`` of caller audio in the session's input format last (the gateway's audio limit)."""
        return self.config.input_format.seconds(nbytes)

    async def _on_buffer_append(self, event: ClientEvent, received_ns: int) -> None:
        fmt = self.config.input_format
        if len(event.audio) % fmt.sample_bytes:
            raise ProtocolError("invalid_audio", f"PCM16 audio needs an even number of bytes, got {len(event.audio)}",
                                param="audio", event_id=event.event_id)
        await self._ingest(fmt.decode(event.audio), fmt.rate, received_ns)

    async def _ingest(self, pcm16: bytes, rate: int, received_ns: int) -> None:
        """Caller audio, however it arrived: cut into windows and, with server VAD, judged window by window."""
        if self.config.turn_detection is None:
            windows = await asyncio.to_thread(self.input.cut, pcm16, rate)
            if self.input.held_ms() + len(windows) * WINDOW_MS > MAX_BUFFER_MS:
                raise ProtocolError("input_audio_buffer_full",
                                    f"the input buffer holds at most {MAX_BUFFER_MS // 1000} s: commit or clear it")
            self.input.append(windows, received_ns)
            return
        windows, probs = await asyncio.to_thread(self._analyse, pcm16, rate)
        for window, prob in zip(windows, probs, strict=True):
            index = self.input.append([window], received_ns)
            match self.detector.push(prob, index):
                case SpeechStarted(window=first):
                    self._on_speech_started(first)
                case SpeechPaused(window=last):
                    self._on_speech_paused(last)
                case SpeechResumed():
                    self.speculation.speech_resumed()
                case SpeechStopped(window=last):
                    if not self._hold_open():
                        self._on_speech_stopped(last)
            if (finished := self.pauses.finished_due()) is not None and not self.arbiter.active:
                self._pause_decided(EndTurn(finished, finished=True))
            if self._turn is not None and not self.arbiter.active and self.detector.ask_end_of_turn():
                self._ask_end_of_turn(self._turn)
        if self.arbiter.active:
            self._act(self.arbiter.sound(self.input.end - 1))
        elif self._turn is None:  # idle: keep only what prefix padding may need
            self.input.keep_last(int(self.config.turn_detection.prefix_padding_ms / WINDOW_MS) + 2)
        elif self.detector.speaking and self.config.transcription and self.tuning.partials \
                and self.speculation.held is None:  # a held reply is transcribing already
            self.listening.heard(self.input)

    def _analyse(self, pcm16: bytes, rate: int) -> tuple[list[np.ndarray], list[float]]:
        """Windows and their speech probabilities (on a worker thread: the VAD's state is this session's)."""
        windows = self.input.cut(pcm16, rate)
        return windows, self.detector.probabilities(windows)

    # --- turn detection ------------------------------------------------------------------------------

    def _on_speech_started(self, window: int) -> None:
        if self.arbiter.active:  # the sound goes on after a stop: the same suspected interruption
            self.arbiter.sound_started()
            return
        td = self.config.turn_detection
        first = max(self.input.start, window - int((td.prefix_padding_ms if td else 300) / WINDOW_MS))
        turn = UserTurn.new(new_id("item"), first_window=first, audio_start_ms=self.input.ms(first))
        turn.timeline.mark("speech_start", self.input.arrival(window))
        self.idle.disarm()
        self._turn = turn
        reply = self.reply
        interrupts = reply is not None and (td is None or td.interrupt_response)
        check = self.config.interruption_check
        if interrupts and reply is not None and reply.state is ReplyState.LIVE and \
                (self.tuning.interruption.enabled if check is None else check):
            # words, or a cough? The reply pauses while the sound is checked; the client hears of it if it is words
            self.arbiter.begin(InterruptionCheck(self.tuning.interruption, first_window=first, onset_window=window),
                               reply)
            reply.pause()
            self.transport.send(ev.reply_paused(reply.id, self.input.ms(window)))
            return
        self._take_turn(turn, window, reply if interrupts else None)

    def _take_turn(self, turn: UserTurn, onset_window: int, interrupted: Reply | None) -> None:
        """The caller is speaking (a turn of their own): say so, stop the reply they talk over (barge-in)."""
        self.listening.begin(turn, onset_window)
        self.transport.send(ev.speech_started(turn.item_id, self.input.ms(onset_window)))
        if interrupted is not None:
            interrupted.interrupted()
        turn.rtt = self.tasks.spawn(stages.measure_rtt(self.transport, turn.timeline))

    # --- a suspected interruption (app/session/arbiter.py) ----------------------------------------------

    def _act(self, decisions: list[Decision]) -> None:
        """Carry out what the arbiter decided about the sound over the reply."""
        for decision in decisions:
            match decision:
                case Resume(reply=reply):
                    self.transport.send(ev.reply_resumed(reply.id))
                    reply.resume()
                case Check(check=check, first_window=first, end=end):
                    audio = self.input.audio(first, end)
                    self.arbiter.checking(self.tasks.spawn(self._run_check(check, audio, end)))
                case Confirm(reply=reply, onset_window=onset, stopped=stopped):
                    self.stats.interruption(confirmed=True)
                    if self._turn is None:
                        continue
                    self._take_turn(self._turn, onset, reply)
                    if stopped is not None:  # the caller already stopped: the turn is over too
                        self._on_speech_stopped(stopped)
                case Dismiss(reply=reply, resume=resume):
                    # not an interruption (a cough): nothing of the sound reaches the conversation or the client
                    self._turn = None
                    self.stats.interruption(confirmed=False)
                    if resume:
                        self.transport.send(ev.reply_resumed(reply.id))
                        reply.resume()

    async def _run_check(self, check: InterruptionCheck, audio: np.ndarray, end: int) -> None:
        try:
            # no prompt: primed with names, Whisper "hears" them in a cough
            transcript = await self.stack.asr.recognize(audio, window=self.tuning.partial_window, prompt="",
                                                        need=Need.INTERRUPTION)
        except Exception:
            log.warning("session %s: checking an interruption failed", self.config.id, exc_info=True)
            transcript = None  # unsure: the arbiter takes it for the caller's words
        finally:
            self.arbiter.checked(asyncio.current_task())
        self._act(self.arbiter.heard(check, transcript, end, self.input.end - 1))

    def _on_speech_paused(self, last_window: int) -> None:
        """The first silence after speech: prepare the reply now, hold it until the commit (or drop it)."""
        if self.arbiter.active:
            self._act(self.arbiter.sound(self.input.end - 1, paused=True))
            return
        td, turn = self.config.turn_detection, self._turn
        if turn is None or td is None or not td.create_response or self.reply is not None \
                or self.config.transcription_only or not Speculation.enabled(self.config, self.tuning):
            return
        held = self._start_reply(turn, audio=self.input.audio(turn.first_window, last_window), held=True)
        self.speculation.hold(held)
        self.stats.speculation_started()
        if self.pauses.reads_words:
            self.tasks.spawn(self._decide(self.pauses.read_words(Pause(turn, last_window), held)))

    # --- what a pause means (app/session/pauses.py) ----------------------------------------------------

    def _hold_open(self) -> bool:
        """``server_vad`` stopped the speech: the pause policy may take the stop back (words that go on)."""
        turn = self._turn
        if turn is None or self.arbiter.active:
            return False
        match self.pauses.stopped(Pause(turn, self.detector.last_speech_window), self._held_reply(turn)):
            case Settle(pause=pause, held=held):
                self.tasks.spawn(self._decide(self.pauses.settle(pause, held)))
            case HoldOn(words=words, ms=ms):
                self._held_open(words, ms)
            case _:
                return False
        return True

    def _ask_end_of_turn(self, turn: UserTurn) -> None:
        """``semantic_vad``: the end-of-turn model reads the last 8 s of the turn (no more is copied)."""
        audio = self.input.audio(max(turn.first_window, self.input.end - SMART_TURN_SAMPLES // WINDOW))
        pause = Pause(turn, self.detector.last_speech_window)
        work = self.pauses.complete(self.stack.end_of_turn, pause, audio, self._held_reply(turn))
        self.tasks.spawn(self._decide(work))

    async def _decide(self, work: Awaitable[PauseDecision | None]) -> None:
        self._pause_decided(await work)

    def _pause_decided(self, decision: PauseDecision | None) -> None:
        """Carry out the pause policy's decision while the caller is still in that pause."""
        if decision is None or not self._paused_at(decision.pause) or \
                (decision.held_only and not self.detector.holding):
            return  # the caller spoke again, or the turn ended meanwhile
        if isinstance(decision, HoldOn) and (not decision.rehold or self.detector.rehold(decision.ms)):
            self._held_open(decision.words, decision.ms)
            return
        if isinstance(decision, EndTurn) and decision.finished:
            self.pauses.finished = None
        if (stopped := self.detector.end_now()) is not None:
            if isinstance(decision, EndTurn) and decision.finished:
                self.stats.pause_finished()
            self._on_speech_stopped(stopped.window)

    def _held_reply(self, turn: UserTurn) -> Reply | None:
        """The reply held at this pause of ``turn``: its ``question`` is the caller's words up to the pause."""
        held = self.speculation.held
        return held if held is not None and held.turn is turn and held.state is ReplyState.HELD else None

    def _paused_at(self, pause: Pause) -> bool:
        """The caller is still in ``pause`` (no speech since, no commit)."""
        return self._turn is pause.turn and self.detector.speaking and \
            self.detector.last_speech_window == pause.last_window

    def _held_open(self, words: str, ms: int) -> None:
        self.stats.pause_held_open()
        log.info("session %s: the words go on (%r): the pause goes on to %d ms", self.config.id, words[-40:], ms)

    def _on_speech_stopped(self, last_window: int) -> None:
        if self.arbiter.active:
            self._act(self.arbiter.sound_stopped(last_window, self.input.end - 1))
            return
        turn = self._turn
        if turn is None:
            return
        self.pauses.turn_over()  # a reading under way is of no use
        commit_ns = now_ns()  # the server decides the user's turn is over
        turn.timeline.mark("speech_end", self.input.arrival(last_window))
        turn.audio_end_ms = self.input.ms(last_window + 1)
        self.transport.send(ev.speech_stopped(turn.item_id, turn.audio_end_ms))
        td = self.config.turn_detection
        create = (td is None or td.create_response) and not self.config.transcription_only
        self._commit(turn, self.input.take(turn.first_window), commit_ns, create=create)

    async def _on_buffer_commit(self, event: ClientEvent, received_ns: int) -> None:
        if self.input.empty:
            raise ProtocolError("input_audio_buffer_commit_empty", "the input audio buffer is empty")
        if self.arbiter.active:  # the client commits the sound over the reply: it is the caller's turn
            self._act([self.arbiter.confirm()])
        turn = self._turn or UserTurn.new(new_id("item"), first_window=self.input.start,
                                          audio_start_ms=self.input.ms(self.input.start))
        self.input.flush_pending(received_ns)
        if not turn.timeline.has("speech_end"):
            turn.timeline.mark("speech_end", self.input.last_arrival())
        turn.audio_end_ms = self.input.ms(self.input.end)
        self.detector.reset()
        self._commit(turn, self.input.take(turn.first_window), received_ns, create=False)

    def _commit(self, turn: UserTurn, audio: np.ndarray, commit_ns: int, *, create: bool) -> None:
        """The caller's turn is over: it joins the conversation, and its reply is adopted, started or not."""
        self._turn = None
        self.listening.end()
        tl = turn.timeline
        tl.mark("turn_commit", commit_ns)
        if self._gateway_ms is not None:
            tl.measured["gateway"] = self._gateway_ms
        self.transport.send(ev.buffer_committed(turn.item_id, self.conversation.last_id))
        item = Item(turn.item_id, "user", "input_audio", None)
        previous = self.conversation.add(item)
        self.transport.send(ev.item_added(item.to_wire(), previous))
        self.stats.turns += 1
        if self.speculation.commit(turn, commit_ns):
            return
        if create:
            self._start_reply(turn, audio=audio)
        else:
            self.tasks.spawn(self._transcribe_only(turn, audio))

    async def _transcribe_only(self, turn: UserTurn, audio: np.ndarray) -> None:
        self._transcribing += 1
        try:
            turn.transcript = text = await stages.transcribe(self.stack.asr, audio, turn.timeline,
                                                             self.config.transcription_prompt)
        except stages.TranscriptionFailed as exc:
            self.transport.send(ev.transcription_failed(turn.item_id, exc.message))
            return
        finally:
            self._transcribing -= 1
        if (item := self.conversation.set_transcript(turn.item_id, text)) is not None:
            for event in ev.transcript_done(item.to_wire(), text, turn.audio_end_ms / 1000):
                self.transport.send(event)

    async def _on_buffer_clear(self, event: ClientEvent, received_ns: int) -> None:
        self.input.clear(pending=True)
        self.detector.reset()
        if self.arbiter.active:
            self._act([self.arbiter.dismiss()])
        self._turn = None
        self.listening.end()
        self.transport.send(ev.buffer_cleared())

    async def _on_output_audio_clear(self, event: ClientEvent, received_ns: int) -> None:
        """WebRTC: stop the reply audio still queued on the track (the API expects a ``response.cancel``
        first to stop the generation as well)."""
        latest = self._reply.id if self._reply is not None else None
        if not self.transport.clear_audio(latest):
            raise ProtocolError("unsupported_event", "output_audio_buffer.clear is for WebRTC calls: over a "
                                "WebSocket the client holds (and clears) the audio it plays", param="type")

    # --- the conversation (app/session/items.py) -------------------------------------------------------

    def _items(self, apply: Callable[[Conversation, ClientEvent, int], list[dict[str, Any]]]) -> Handler:
        async def on_event(event: ClientEvent, received_ns: int) -> None:
            for out in apply(self.conversation, event, received_ns):
                self.transport.send(out)
        return on_event

    # --- replies -------------------------------------------------------------------------------------

    async def _on_response_create(self, event: ClientEvent, received_ns: int) -> None:
        if self.config.transcription_only:
            raise ProtocolError("unsupported_event", "a transcription session makes no responses (session.type "
                                "is 'transcription')", param="type")
        if self.reply is not None:
            raise ProtocolError("conversation_already_has_active_response",
                                "a response is in progress; cancel it first (response.cancel)")
        options = ReplyOptions.resolve(self.config, event.response)  # before anything starts: may refuse
        last = self.conversation.last_user_text()
        if last is None:
            raise ProtocolError("no_user_input", "there is no user message to respond to")
        turn = UserTurn.new(last[0], transcript=last[1])
        turn.timeline.mark("turn_commit", received_ns)  # the client's commit event
        turn.timeline.mark("asr_final", received_ns)    # text needs no recognition
        if self._gateway_ms is not None:
            turn.timeline.measured["gateway"] = self._gateway_ms
        turn.rtt = self.tasks.spawn(stages.measure_rtt(self.transport, turn.timeline))
        self._start_reply(turn, options=options)

    async def _on_response_cancel(self, event: ClientEvent, received_ns: int) -> None:
        rid, reply = event.response_id, self.reply
        if reply is None or (rid and rid != reply.id):
            raise ProtocolError("response_not_found", "no response in progress to cancel", param="response_id")
        reply.cancel("client_cancelled")

    def _start_reply(self, turn: UserTurn, *, audio: np.ndarray | None = None, held: bool = False,
                     options: ReplyOptions | None = None, idle: bool = False) -> Reply:
        """The one place a reply is wired to the stages; ``held``: speculative, nothing sent until adopted;
        ``idle``: the nudge after the caller's long silence."""
        if self.reply is not None:
            self.reply.cancel("turn_detected")
        self.idle.disarm()
        output = ReplyOutput(self.transport, new_id("resp"), new_id("item"), held=held)
        self._reply = Reply(turn, options or ReplyOptions.resolve(self.config), stack=self.stack,
                            tuning=self.tuning, conversation=self.conversation, output=output, stats=self.stats,
                            conversation_id=self.config.id, audio=audio, started_ns=now_ns(), idle=idle)
        self._reply.start(self.tasks.spawn)
        self.tasks.spawn(self._after(self._reply))
        if self.rate_limits is not None:
            output.send(ev.rate_limits_updated(self.rate_limits()), keep=True)  # held with a held reply
        return self._reply

    # --- the caller's long silence (turn_detection.idle_timeout_ms) ------------------------------------

    async def _after(self, reply: Reply) -> None:
        """Once ``reply`` is finished, the caller's silence is timed (``idle.nudge_after``)."""
        await reply.finished.wait()
        delay_s = nudge_after(self.config.turn_detection, reply, transcription_only=self.config.transcription_only)
        if delay_s is not None and reply is self._reply:
            self.idle.arm(delay_s, self.input.ms(self.input.end), self._idle_timeout)

    def _idle_timeout(self) -> None:
        if self.reply is not None or self._turn is not None:
            return  # something is going on after all
        item_id = new_id("item")
        self.transport.send(ev.timeout_triggered(item_id, self.idle.from_ms, self.input.ms(self.input.end)))
        turn = UserTurn.new(item_id, transcript="")
        turn.timeline.mark("turn_commit")
        item = Item(item_id, "user", "input_audio", "")
        self.transport.send(ev.item_added(item.to_wire(), self.conversation.add(item)))
        self._start_reply(turn, idle=True)

    # --- teardown ------------------------------------------------------------------------------------

    async def close(self) -> None:
        """The connection is gone: stop everything this session started (replies abort their engine
        requests; transcriptions, partials and RTT probes end)."""
        self.idle.disarm()
        await self.tasks.cancel_all()
