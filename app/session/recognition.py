"""Audio recognition: the caller's side of the conversation (as LiveKit's ``AudioRecognition``).

Caller audio goes through the input buffer, Silero VAD and the endpointer; this part carries out what its parts
decide about it - the pause policy (what a silence means), the arbiter (a sound over the reply: words, or a
cough?), speculation (the reply held at the first pause), listening (partials, retrieval ahead) - and commits
each turn: to the conversation, and to the response slot (:class:`~sub250.session.responses.Responses`) or a
transcription. It calls only parts below it, never the session; the caller's state is one :class:`Caller`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

import numpy as np

from sub250.asr.base import Need
from sub250.audio.endpointing import WINDOW_MS, SpeechPaused, SpeechResumed, SpeechStarted, SpeechStopped
from sub250.audio.smart_turn import N_SAMPLES as SMART_TURN_SAMPLES
from sub250.audio.vad import WINDOW
from sub250.metrics.timeline import now_ns
from sub250.protocol import server_events as ev
from sub250.protocol.events import ProtocolError, new_id
from sub250.protocol.session_config import SessionConfig
from sub250.session import stages
from sub250.session.arbiter import Check, Confirm, Decision, Dismiss, InterruptionArbiter, Resume
from sub250.session.caller import Caller, CallerState
from sub250.session.conversation import Conversation, Item
from sub250.session.engines import Engines
from sub250.session.input_buffer import MAX_BUFFER_MS, InputBuffer
from sub250.session.interruption import InterruptionCheck
from sub250.session.listening import Listening
from sub250.session.output import AsConfigured
from sub250.session.pauses import Decision as PauseDecision
from sub250.session.pauses import EndTurn, HoldOn, Pause, PausePolicy, Settle
from sub250.session.reply import Reply, ReplyState
from sub250.session.responses import Responses
from sub250.session.speculation import Speculation
from sub250.session.stats import SessionStats
from sub250.session.transcription import Transcriptions
from sub250.session.tuning import PipelineTuning
from sub250.session.turn import UserTurn
from sub250.session.turn_detection import TurnDetector
from sub250.session.turn_words import TurnWords
from sub250.tasks import TaskSet

log = logging.getLogger(__name__)


class AudioRecognition:
    def __init__(self, stack: Engines, transport: AsConfigured, conversation: Conversation, stats: SessionStats,
                 tasks: TaskSet, *, input: InputBuffer, caller: Caller, responses: Responses,
                 transcriptions: Transcriptions, config: Callable[[], SessionConfig],
                 tuning: Callable[[], PipelineTuning], gateway_ms: Callable[[], float | None]) -> None:
        """``input``, ``caller``: the session's (the response slot reads them too); ``config``, ``tuning``: the
        session's now; ``gateway_ms``: the gateway time of the event being handled."""
        self.stack, self.transport, self.conversation, self.stats, self.tasks = stack, transport, conversation, \
            stats, tasks
        self.input, self.caller, self.responses, self.transcriptions = input, caller, responses, transcriptions
        self._config, self._tuning, self._gateway_ms = config, tuning, gateway_ms
        tune, td = tuning(), config().turn_detection
        self.speculation = Speculation()
        self.listening = Listening(stack.asr, stack.retriever, window=tune.partial_window, send=transport.send,
                                   spawn=tasks.spawn)
        self.detector = TurnDetector(stack.vad_session, td, pause_ms=tune.speculate_after_ms or 64)
        # the words at a pause read by our end-of-turn model, or by the LLM
        reader = stack.llm if stack.turn_model is None else stack.turn_model
        turn_words = None if not tune.finished_commit_ms else \
            TurnWords(reader, tune.finished_logprob, spawn=tasks.spawn, wait_s=max(tune.hold_open_ms, 500) / 1000)
        #: What a silence in the caller's speech means (hold-open, the reading of words, semantic).
        self.pauses = PausePolicy(tuning, self.detector, stats, turn_words)
        #: A suspected interruption of a live reply (paused meanwhile): words, or a cough?
        self.arbiter = InterruptionArbiter()

    @property
    def config(self) -> SessionConfig:
        return self._config()

    @property
    def tuning(self) -> PipelineTuning:
        return self._tuning()

    @property
    def busy(self) -> bool:
        """The caller is speaking, or a sound over the reply is being checked."""
        return self.caller.turn is not None or self.arbiter.active

    def configure(self, config: SessionConfig) -> None:
        """The session's configuration changed to ``config``."""
        self.listening.prompt = config.transcription_prompt
        self.detector.configure(config.turn_detection)
        td = config.turn_detection
        if self.arbiter.active and (td is None or not td.interrupt_response):
            self._act([self.arbiter.dismiss()])  # no server VAD, or no interruptions: the reply plays on

    # --- caller audio --------------------------------------------------------------------------------

    async def ingest(self, pcm16: bytes, rate: int, received_ns: int) -> None:
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
            if (turn := self.caller.turn) is not None and not self.arbiter.active and self.detector.ask_end_of_turn():
                # semantic_vad: the end-of-turn model reads the last 8 s of the turn (no more is copied)
                audio = self.input.audio(max(turn.first_window, self.input.end - SMART_TURN_SAMPLES // WINDOW))
                self.tasks.spawn(self._decide(self.pauses.complete(
                    self.stack.end_of_turn, Pause(turn, self.detector.last_speech_window), audio,
                    self.speculation.held_for(turn))))
        if self.arbiter.active:
            self._act(self.arbiter.sound(self.input.end - 1))
        elif self.caller.turn is None:  # idle: keep only what prefix padding may need
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
        self.responses.idle.disarm()
        reply = self.responses.current
        interrupts = reply is not None and (td is None or td.interrupt_response)
        check = self.config.interruption_check
        if interrupts and reply is not None and reply.state is ReplyState.LIVE and \
                (self.tuning.interruption.enabled if check is None else check):
            # words, or a cough? The reply pauses while the sound is checked; the client hears of it if it is words
            self.caller.to(CallerState.SUSPECTED, turn, "a sound over the reply")
            self.arbiter.begin(InterruptionCheck(self.tuning.interruption, first_window=first, onset_window=window),
                               reply)
            reply.pause()
            self.transport.send(ev.reply_paused(reply.id, self.input.ms(window)))
            return
        self._take_turn(turn, window, reply if interrupts else None)

    def _take_turn(self, turn: UserTurn, onset_window: int, interrupted: Reply | None) -> None:
        """The caller is speaking (a turn of their own): say so, stop the reply they talk over (barge-in)."""
        self.caller.to(CallerState.SPEAKING, turn, "barge-in" if interrupted is not None else "")
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
                    if self.caller.turn is None:
                        continue
                    self._take_turn(self.caller.turn, onset, reply)
                    if stopped is not None:  # the caller already stopped: the turn is over too
                        self._on_speech_stopped(stopped)
                case Dismiss(reply=reply, resume=resume):
                    # not an interruption (a cough): nothing of the sound reaches the conversation or the client
                    self.caller.to(CallerState.LISTENING, why="not an interruption")
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
        td, turn = self.config.turn_detection, self.caller.turn
        if turn is None or td is None or not td.create_response or self.responses.current is not None \
                or self.config.transcription_only or not Speculation.enabled(self.config, self.tuning):
            return
        held = self.responses.start(turn, audio=self.input.audio(turn.first_window, last_window), held=True)
        self.speculation.hold(held)
        self.stats.speculation_started()
        if self.pauses.reads_words:
            self.tasks.spawn(self._decide(self.pauses.read_words(Pause(turn, last_window), held)))

    # --- what a pause means (app/session/pauses.py) ----------------------------------------------------

    def _hold_open(self) -> bool:
        """``server_vad`` stopped the speech: the pause policy may take the stop back (words that go on)."""
        turn = self.caller.turn
        if turn is None or self.arbiter.active:
            return False
        match self.pauses.stopped(Pause(turn, self.detector.last_speech_window), self.speculation.held_for(turn)):
            case Settle(pause=pause, held=held):
                self.tasks.spawn(self._decide(self.pauses.settle(pause, held)))
            case HoldOn(words=words, ms=ms):
                self.pauses.held_open(words, ms)
            case _:
                return False
        return True

    async def _decide(self, work: Awaitable[PauseDecision | None]) -> None:
        self._pause_decided(await work)

    def _pause_decided(self, decision: PauseDecision | None) -> None:
        """Carry out the pause policy's decision while the caller is still in that pause."""
        if (stopped := self.pauses.outcome(decision, self.caller.turn)) is not None:
            self._on_speech_stopped(stopped)

    def _on_speech_stopped(self, last_window: int) -> None:
        if self.arbiter.active:
            self._act(self.arbiter.sound_stopped(last_window, self.input.end - 1))
            return
        turn = self.caller.turn
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

    def commit(self, received_ns: int) -> None:
        """``input_audio_buffer.commit``: the buffer so far is the caller's turn (no reply is made for it)."""
        if self.input.empty:
            raise ProtocolError("input_audio_buffer_commit_empty", "the input audio buffer is empty")
        if self.arbiter.active:  # the client commits the sound over the reply: it is the caller's turn
            self._act([self.arbiter.confirm()])
        turn = self.caller.turn or UserTurn.new(new_id("item"), first_window=self.input.start,
                                                audio_start_ms=self.input.ms(self.input.start))
        self.input.flush_pending(received_ns)
        if not turn.timeline.has("speech_end"):
            turn.timeline.mark("speech_end", self.input.last_arrival())
        turn.audio_end_ms = self.input.ms(self.input.end)
        self.detector.reset()
        self._commit(turn, self.input.take(turn.first_window), received_ns, create=False)

    def _commit(self, turn: UserTurn, audio: np.ndarray, commit_ns: int, *, create: bool) -> None:
        """The caller's turn is over: it joins the conversation, and its reply is adopted, started or not."""
        self.caller.to(CallerState.LISTENING, why="committed")
        self.listening.end()
        tl = turn.timeline
        tl.mark("turn_commit", commit_ns)
        if (gateway_ms := self._gateway_ms()) is not None:
            tl.measured["gateway"] = gateway_ms
        self.transport.send(ev.buffer_committed(turn.item_id, self.conversation.last_id))
        item = Item(turn.item_id, "user", "input_audio", None)
        previous = self.conversation.add(item)
        self.transport.send(ev.item_added(item.to_wire(), previous))
        self.stats.turns += 1
        if self.speculation.commit(turn, commit_ns):
            return
        if create:
            self.responses.start(turn, audio=audio)
        else:
            self.tasks.spawn(self.transcriptions.run(turn, audio, self.config.transcription_prompt))

    def clear(self) -> None:
        """``input_audio_buffer.clear``: the caller's audio so far is dropped, and the turn under way with it."""
        self.input.clear(pending=True)
        self.detector.reset()
        if self.arbiter.active:
            self._act([self.arbiter.dismiss()])
        self.caller.to(CallerState.LISTENING, why="cleared")
        self.listening.end()
        self.transport.send(ev.buffer_cleared())
