"""The stages of one reply, each a small awaitable with explicit inputs: final transcript, retrieval, prompt,
generation, speech. Each takes its latency marks on the turn's timeline at the moment the mark names; none
knows of wire formats or of the session.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from app.asr.base import ASREngine
from app.audio.pcm import StreamResampler, float32_to_pcm16, pcm16_to_float32
from app.audio.rates import OUTPUT_RATE
from app.audio.vad import WINDOW
from app.llm.base import LLMEngine, LLMRequest, TokenDelta
from app.llm.prompt import build_messages
from app.metrics.timeline import TurnTimeline, now_ns
from app.rag.base import BaseRetriever
from app.session.tuning import PipelineTuning
from app.session.turn import UserTurn
from app.tts.base import TTSEngine
from app.tts.chunker import SentenceChunker

log = logging.getLogger(__name__)

#: Reply audio goes out in pieces of this many ms (small enough to stop quickly on barge-in).
AUDIO_DELTA_MS = 100


async def measure_rtt(transport: Any, timeline: TurnTimeline) -> None:
    """The client round trip of this turn (``network_rtt``), when the transport can measure it."""
    rtt = await transport.measure_rtt()
    if rtt is not None:
        timeline.measured["network_rtt"] = rtt


async def transcribe(asr: ASREngine, audio: np.ndarray, timeline: TurnTimeline) -> str:
    """The final transcript (empty for less than one VAD window of audio); marks ``asr_final``."""
    text = "" if audio.size < WINDOW else (await asr.recognize(audio)).text
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


async def generate(llm: LLMEngine, request: LLMRequest, timeline: TurnTimeline) -> AsyncIterator[TokenDelta]:
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
    ``AUDIO_DELTA_MS`` piece to ``emit``. Marks ``first_audio`` when the first chunk is synthesized."""

    def __init__(self, tts: TTSEngine, timeline: TurnTimeline, emit: Callable[[memoryview], None], *,
                 first_clause: bool) -> None:
        self.tts, self.timeline, self.emit = tts, timeline, emit
        self.chunker = SentenceChunker(first_clause=first_clause)
        self._queue: asyncio.Queue[str | None] = asyncio.Queue()
        self._resampler = StreamResampler(tts.sample_rate, OUTPUT_RATE)
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

    @property
    def done(self) -> bool:
        """The worker has ended: everything was handed on, it was stopped, or synthesis failed."""
        return self._task.done()

    def _synthesize(self, text: str | None) -> tuple[bytes, int]:
        """(PCM16 at the wire's rate, when the synthesis finished) - on the TTS engine's thread. ``None``: the
        end of the reply, what the resampler still holds."""
        if text is None:
            return float32_to_pcm16(self._resampler.process(np.zeros(0, dtype=np.float32), last=True)), now_ns()
        chunks = list(self.tts.synthesize(text))
        done_ns = now_ns()
        pcm = b"".join(float32_to_pcm16(self._resampler.process(pcm16_to_float32(c.pcm16))) for c in chunks)
        return pcm, done_ns

    async def _work(self) -> None:
        step = OUTPUT_RATE * AUDIO_DELTA_MS // 1000 * 2
        while True:
            text = await self._queue.get()
            pcm, done_ns = await self.tts.run(self._synthesize, text)
            if text is not None:
                self.timeline.mark("first_audio", done_ns)
            view = memoryview(pcm)
            for i in range(0, len(view), step):
                self.emit(view[i : i + step])
            if text is None:
                return
