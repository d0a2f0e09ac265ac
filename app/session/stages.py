"""The stages of one reply, each a small awaitable with explicit inputs: final transcript, retrieval, prompt,
generation, speech. Each takes its latency marks on the turn's timeline at the moment the mark names; none
knows of wire formats or of the session.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import AsyncGenerator, Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from sub250.answer.answerer import Answerer
from sub250.answer.policy import AnswerPolicy
from sub250.asr.base import ASREngine, Need
from sub250.audio.pcm import StreamResampler, float32_to_pcm16, pcm16_to_float32
from sub250.audio.rates import OUTPUT_RATE
from sub250.audio.vad import WINDOW
from sub250.llm.base import LLMEngine, LLMRequest, TokenDelta
from sub250.llm.prompt import build_messages
from sub250.metrics.timeline import TurnTimeline, now_ns
from sub250.protocol.events import new_id
from sub250.protocol.tools import FunctionTool, ToolChoice
from sub250.rag.base import BaseRetriever
from sub250.session.engines import Engines
from sub250.session.tuning import PipelineTuning
from sub250.session.turn import UserTurn
from sub250.tools import ToolCall, ToolCaller
from sub250.tts.base import SpeechNeed, TTSEngine
from sub250.tts.chunker import SentenceChunker

log = logging.getLogger(__name__)

#: Reply audio goes out in pieces of this many ms (small enough to stop quickly on barge-in).
AUDIO_DELTA_MS = 100


async def measure_rtt(transport: Any, timeline: TurnTimeline) -> None:
    """The client round trip of this turn (``network_rtt``), when the transport can measure it."""
    rtt = await transport.measure_rtt()
    if rtt is not None:
        timeline.measured["network_rtt"] = rtt


class TranscriptionFailed(Exception):
    """The recognizer raised: ``message`` is what the client may be told (an error id; the cause is logged)."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


async def transcribe(asr: ASREngine, audio: np.ndarray, timeline: TurnTimeline, prompt: str | None = None,
                     need: Need | Callable[[], Need] = Need.FINAL) -> str:
    """The final transcript (empty for less than one VAD window of audio); marks ``asr_final``. ``prompt``: the
    session's transcription prompt (None: the profile's); ``need``: how urgent it is beside other sessions' calls
    (a reply prepared at a pause is :attr:`Need.AHEAD` until committed). A recognizer failure is logged under an
    error id and raised as :class:`TranscriptionFailed`."""
    try:
        if audio.size < WINDOW:
            text = ""
        else:
            t0 = now_ns()
            transcript = await asr.recognize(audio, prompt=prompt, need=need)
            wall_ms = (now_ns() - t0) / 1e6
            text = transcript.text
            # where the final transcript's time went: waiting for the engine (another call holds it) vs its run
            timeline.measured["asr_compute"] = transcript.compute_seconds * 1000
            timeline.measured["asr_wait"] = max(0.0, wall_ms - transcript.compute_seconds * 1000)
    except Exception as exc:
        error_id = new_id("err")
        log.error("transcription failed (error id %s)", error_id, exc_info=True)
        raise TranscriptionFailed(f"the audio could not be transcribed (error id {error_id})") from exc
    timeline.mark("asr_final")
    return text


@dataclass
class Retrieved:
    passages: list[Any] = field(default_factory=list)
    #: The store could not be reached: the reply goes on without context.
    failed: bool = False
    #: The question's embedding (for the answer's sentence picker), when the retriever made one.
    vector: np.ndarray | None = None

    @property
    def top_score(self) -> float | None:
        """Cosine of the question to the best passage (None: nothing found)."""
        return 1.0 - self.passages[0].distance if self.passages else None


async def retrieve(retriever: BaseRetriever | None, question: str, turn: UserTurn) -> Retrieved:
    """The passages for ``question``; marks ``retrieval_start`` / ``retrieval_end``. A failure is logged and
    reported as ``failed`` (a dead database must not end the conversation)."""
    tl = turn.timeline
    tl.mark("retrieval_start")
    out = Retrieved()
    if retriever is None:
        out.failed = True
    else:
        try:
            r = await retriever.retrieve(question)
        except Exception:
            log.warning("retrieval failed; answering without context", exc_info=True)
            out.failed = True
        else:
            out.passages, out.vector = r.passages, r.vector
            tl.retrieval_cache = r.cache
            if r.cache in ("exact", "near") and turn.prefetch_ms is not None and "retrieval_ahead" not in tl.measured:
                tl.measured["retrieval_ahead"] = turn.prefetch_ms  # the search was done on a partial
    tl.mark("retrieval_end")
    return out


def build_prompt(llm: LLMEngine, tuning: PipelineTuning, instructions: str, question: str, passages: list[Any],
                 history: list[dict[str, str]], timeline: TurnTimeline, *,
                 hint: str | None = None) -> tuple[list[dict[str, str]], list[int]]:
    """Chat messages and their token ids; marks ``prompt_ready``."""
    messages = build_messages(instructions, question, passages, history, llm.count_tokens,
                              passage_tokens=tuning.context_tokens, history_tokens=tuning.history_tokens, hint=hint)
    ids = llm.tokenize(messages)
    timeline.mark("prompt_ready")
    return messages, ids


def answerer(stack: Engines, tuning: PipelineTuning, policy: AnswerPolicy | None = None) -> Answerer:
    """The answer planner on ``stack``'s engines: prompts built and generated by :func:`build_prompt` and
    :func:`generate`, sentences picked by the stack's picker; ``policy`` defaults to the profile's."""
    return Answerer(tuning.answer if policy is None else policy, functools.partial(build_prompt, stack.llm, tuning),
                    functools.partial(generate, stack.llm), stack.picker, stack.vocabulary)


def tool_caller(stack: Engines, tuning: PipelineTuning) -> ToolCaller:
    """The tool decision on ``stack``'s engines: the LLM's stream (structured outputs) and the stack's
    embedding selector, by the profile's ``[tools]`` policy."""
    return ToolCaller(tuning.tools, stack.llm.stream, stack.tool_selector)


async def decide_tool(caller: ToolCaller, question: str, found: Retrieved, tools: tuple[FunctionTool, ...],
                      choice: ToolChoice, request_id: str, timeline: TurnTimeline) -> ToolCall | None:
    """Which tool the question needs (None: none); its time is ``tool_choice`` beside the budget and what was
    decided is ``tool`` in the turn's report. A model output invalid for the tool raises ToolArgumentsError."""
    t0 = now_ns()
    try:
        decision = await caller.decide(question, found.vector, tools, choice, request_id, kb_score=found.top_score)
    finally:
        timeline.measured["tool_choice"] = (now_ns() - t0) / 1e6
    timeline.tool = decision.report()
    return decision.call


def record_tool_results(timeline: TurnTimeline, results: list[tuple[Any, Any]]) -> None:
    """The answer after the client ran tools: their time at the client (call sent -> output received) is
    ``tool`` beside the budget, and which they were goes in the report."""
    times = [out.tool_ms for _, out in results if out.tool_ms is not None]
    if times:
        timeline.measured["tool"] = sum(times)
    timeline.tool = {"results": [{"name": call.name if call is not None else None, "call_id": out.call_id,
                                  "ms": None if out.tool_ms is None else round(out.tool_ms, 3)}
                                 for call, out in results]}


async def generate(llm: LLMEngine, request: LLMRequest,
                   timeline: TurnTimeline) -> AsyncGenerator[TokenDelta, None]:
    """The engine's stream with its counters recorded on the timeline; marks ``llm_submit``, ``first_token``.
    Yields only deltas that carry text."""
    timeline.mark("llm_submit")
    async with contextlib.aclosing(llm.stream(request)) as stream:  # closed (request aborted) when we stop early
        async for d in stream:
            timeline.tokens = d.num_tokens
            if d.spec_decoding is not None:
                timeline.spec = d.spec_decoding
            if d.prompt_tokens is not None and timeline.prompt_tokens is None:
                timeline.prompt_tokens, timeline.cached_prompt_tokens = d.prompt_tokens, d.cached_prompt_tokens
            if d.text:
                timeline.mark("first_token")
                yield d


class Speaker:
    """Text chunks in (first clause, then sentences), reply audio out at the wire's rate, in order.

    ``put`` never blocks the generation; a worker synthesizes on the TTS engine's threads and hands each
    ``AUDIO_DELTA_MS`` piece to ``emit(piece, words)``, ``words`` being its share of the chunk's words (so that
    what was heard can be told in words). Marks ``first_audio`` when the first chunk is synthesized, and measures
    ``tts_wait``, how long that chunk waited for one of the engine's threads. ``first_need``: how urgent the first
    chunk is (read each time a thread frees: a reply held at a pause asks as ``AHEAD``, then ``FIRST`` once
    committed); later chunks ask as ``LATER``, and become due (``SpeechNeed.DUE``) once the reply's audio left
    to play (``playback_left_ms``) is down to :attr:`DUE_MARGIN_MS`."""

    #: A later chunk still waiting for a thread when its reply has this much audio left to play becomes due:
    #: time for its synthesis on two busy cores (a long sentence at N=4 took up to ~800 ms, docs/BENCHMARKS.md §38).
    DUE_MARGIN_MS = 1500.0

    def __init__(self, tts: TTSEngine, timeline: TurnTimeline, emit: Callable[[memoryview, float], None], *,
                 first_clause: bool, first_need: Callable[[], SpeechNeed] = lambda: SpeechNeed.FIRST,
                 playback_left_ms: Callable[[], float] | None = None) -> None:
        self.tts, self.timeline, self.emit = tts, timeline, emit
        self._first_need = first_need
        self._playback_left_ms = playback_left_ms
        self.chunker = SentenceChunker(first_clause=first_clause)
        self._queue: asyncio.Queue[str | None] = asyncio.Queue()
        self._resampler = StreamResampler(tts.sample_rate, OUTPUT_RATE)
        #: Cleared while :meth:`hold` keeps the worker from starting a synthesis.
        self._going = asyncio.Event()
        self._going.set()
        self._task = asyncio.ensure_future(self._work())

    def put(self, text: str) -> None:
        """Queue the text to speak; raises at once if synthesis already failed (the reply fails now, not after
        the whole generation)."""
        if self._task.done() and not self._task.cancelled() and (exc := self._task.exception()) is not None:
            raise exc
        for chunk in self.chunker.push(text):
            self._queue.put_nowait(chunk)

    async def finish(self) -> None:
        """Speak what is left and wait until all of it was handed on."""
        for chunk in self.chunker.flush():
            self._queue.put_nowait(chunk)
        self._queue.put_nowait(None)
        await self._task

    def stop(self) -> None:
        self._task.cancel()

    def hold(self) -> None:
        """Start no new synthesis until :meth:`release` (one already running finishes): the cores go to
        more urgent work meanwhile. Text keeps queueing; nothing is lost."""
        self._going.clear()

    def release(self) -> None:
        self._going.set()

    @property
    def holding(self) -> bool:
        return not self._going.is_set()

    @property
    def done(self) -> bool:
        """The worker has ended: everything was handed on, it was stopped, or synthesis failed."""
        return self._task.done()

    def _synthesize(self, text: str | None) -> tuple[bytes, int, int]:
        """(PCM16 at the wire's rate, when the synthesis started, when it finished) - on the TTS engine's
        thread. ``None``: the end of the reply, what the resampler still holds."""
        start_ns = now_ns()
        if text is None:
            return (float32_to_pcm16(self._resampler.process(np.zeros(0, dtype=np.float32), last=True)),
                    start_ns, now_ns())
        chunks = list(self.tts.synthesize(text))
        done_ns = now_ns()
        pcm = b"".join(float32_to_pcm16(self._resampler.process(pcm16_to_float32(c.pcm16))) for c in chunks)
        return pcm, start_ns, done_ns

    async def _work(self) -> None:
        step = OUTPUT_RATE * AUDIO_DELTA_MS // 1000 * 2
        while True:
            text = await self._queue.get()
            await self._going.wait()
            first = text is not None and not self.timeline.has("first_audio")
            asked_ns = now_ns()
            if first:
                pcm, start_ns, done_ns = await self.tts.speak(self._synthesize, text, need=self._first_need)
                self.timeline.measured["tts_wait"] = (start_ns - asked_ns) / 1e6
            else:
                left = None if self._playback_left_ms is None else self._playback_left_ms()
                due_s = None if left is None else max(0.0, left - self.DUE_MARGIN_MS) / 1000
                pcm, start_ns, done_ns = await self.tts.speak(self._synthesize, text, need=SpeechNeed.LATER,
                                                              due_s=due_s)
            if text is not None:
                self.timeline.mark("first_audio", done_ns)
            view = memoryview(pcm)
            share = len((text or "").split()) / len(view) if len(view) else 0.0  # words per byte of this chunk
            for i in range(0, len(view), step):
                piece = view[i : i + step]
                self.emit(piece, len(piece) * share)
            if text is None:
                return
