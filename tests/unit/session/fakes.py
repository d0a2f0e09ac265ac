"""Fake engines and transports for the session's unit tests (deterministic, no models).

The fakes subclass the real engine interfaces (``ASREngine``, ``TTSEngine``, ``BaseRetriever``) so the real
``recognize`` lock, engine threads and resampling run; the LLM is duck-typed (``tokenize``, ``count_tokens``,
async ``stream`` and ``abort``), as the session uses it.
"""

from __future__ import annotations

import asyncio
import threading
import time
from dataclasses import dataclass, field
from types import SimpleNamespace

import numpy as np

from sub250.asr.base import ASREngine, Need, Transcript
from scripts.bench import lab
from sub250.errors import EngineError
from sub250.llm.base import TokenDelta
from sub250.metrics.timeline import now_ns
from sub250.profiles import load_profile
from sub250.protocol import parse_client_event
from sub250.protocol.extensions import ALL as ALL_EVENTS
from sub250.protocol.events import encode_audio
from sub250.rag.base import BaseRetriever, Retrieval
from sub250.session.session import RealtimeSession
from sub250.tts.base import AudioChunk, TTSEngine


class FakeVADSession:
    """Energy-based stand-in for Silero's ONNX session (same inputs/outputs)."""

    def run(self, _outputs, feeds):
        x = feeds["input"][0, 64:]
        p = 0.95 if np.abs(x).mean() > 0.05 else 0.02
        return np.array([[p]], dtype=np.float32), feeds["state"]


class FakeASR(ASREngine):
    """Records the size of each audio it transcribes. ``texts``: the transcripts to give, one per call (the
    last one repeats; a ``Transcript`` is given as it is, an exception raised); ``gate``: a ``threading.Event`` each transcription waits for (``entered`` is set once
    one is running, ``windows`` records the ``window`` argument)."""

    def __init__(self, texts=None, gate=None):
        super().__init__()
        self.calls = []
        self.windows = []
        self.prompts = []
        self.finals = []  # the ``final`` argument of each transcription
        #: The ``need`` of each ``recognize`` call, as given (a callable stays one: the test reads it).
        self.needs = []
        self.texts = list(texts) if texts else ["how often do I change the filter"]
        self.gate = gate
        self.entered = threading.Event()

    def load(self):
        pass

    async def recognize(self, audio, *, window=None, prompt=None, need=Need.FINAL):
        self.needs.append(need)
        return await super().recognize(audio, window=window, prompt=prompt, need=need)

    def transcribe(self, audio, *, window=None, prompt=None, final=False):
        self.entered.set()
        if self.gate is not None:
            assert self.gate.wait(5), "the test never opened the ASR gate"
        self.calls.append(audio.size)
        self.windows.append(window)
        self.prompts.append(prompt)
        self.finals.append(final)
        text = self.texts[min(len(self.calls), len(self.texts)) - 1]
        if isinstance(text, Exception):
            raise text
        if isinstance(text, Transcript):
            return text
        return Transcript(text=text, audio_seconds=audio.size / 16000, compute_seconds=0.001)


@dataclass
class FakePassage:
    title: str = "When to Replace the Filter"
    content: str = "Replace it every nine months."
    chunk_id: int = 1
    distance: float = 0.1

    def as_source(self):
        return {"id": 1, "source": "product.md", "title": self.title, "score": 0.9}


class FakeRetriever(BaseRetriever):
    """``cache``: anything not None makes the session search ahead on stable partials; ``calls`` records
    (query, count) of each search."""

    def __init__(self, fail=False, cache=None, served="off"):
        self.fail = fail
        self.cache = cache
        self.served = served
        self.calls = []

    async def retrieve(self, query, k=None, *, count=True):
        self.calls.append((query, count))
        if self.fail:
            raise ConnectionError("database is down")
        return Retrieval(passages=[FakePassage()], embed_ms=1.0, search_ms=1.0, cache=self.served)


@dataclass
class FakeLLM:
    words: list = field(default_factory=lambda: "Replace the filter every nine months. Thanks for asking!".split())
    delay: float = 0.0
    fail: bool = False
    #: With ``fail``: the index of the word at which the stream raises.
    fail_at: int = 2
    aborted: list = field(default_factory=list)
    prompts: list = field(default_factory=list)
    #: The stream aborts its own request when it is closed early (as the vLLM engine's does); False leaves
    #: the abort to the caller, so a test sees exactly the aborts the reply makes.
    abort_on_close: bool = True
    requests: list = field(default_factory=list)
    #: An ``asyncio.Event`` the stream waits for before it yields the word at ``pause_at``.
    pause: object = None
    pause_at: int = 1

    def tokenize(self, messages):
        self.prompts.append(messages)
        return [1, 2, 3]

    def count_tokens(self, text):
        return len(text.split())

    async def stream(self, req):
        self.requests.append(req)
        finished = False
        try:
            for i, w in enumerate(self.words):
                await asyncio.sleep(self.delay)
                if self.pause is not None and i == self.pause_at:
                    await self.pause.wait()
                if self.fail and i == self.fail_at:
                    raise EngineError("the vLLM engine died")
                last = i == len(self.words) - 1
                yield TokenDelta(("" if i == 0 else " ") + w, i + 1, finished=last,
                                 spec_decoding={"num_draft_tokens": 8, "num_accepted_draft_tokens": 4,
                                                "num_spec_tokens": 4} if last else None)
            finished = True
        finally:
            if not finished and self.abort_on_close:
                await self.abort(req.request_id)

    async def abort(self, request_id):
        self.aborted.append(request_id)


class FakeTTS(TTSEngine):
    sample_rate = 22050

    def __init__(self):
        super().__init__()
        self.texts = []  # what was synthesized, in order

    def load(self):
        pass

    def synthesize(self, text):
        self.texts.append(text)
        yield AudioChunk(pcm16=bytes(int(0.2 * self.sample_rate) * 2), sample_rate=self.sample_rate)


class ToneTTS(TTSEngine):
    """``seconds`` of a constant level per synthesis: the n-th call (from 0) gives ``1000 * (n + 1)``, so the
    order of the audio can be told. ``gate``: a ``threading.Event`` each synthesis waits for (``entered`` is
    set once one is running). One worker thread, so ``await tts.run(lambda: None)`` waits for a synthesis in
    flight (``workers``: more). ``fifo``: syntheses served in turn, not by need (``[tts] scheduling = "arrival"``)."""

    def __init__(self, sample_rate=24000, seconds=0.25, gate=None, fifo=False, workers=1):
        super().__init__(workers=workers, fifo=fifo)
        self.sample_rate, self.seconds, self.gate = sample_rate, seconds, gate
        self.texts = []
        self.entered = threading.Event()

    def load(self):
        pass

    def synthesize(self, text):
        level = 1000 * (len(self.texts) + 1)
        self.texts.append(text)
        self.entered.set()
        if self.gate is not None:
            assert self.gate.wait(5), "the test never opened the TTS gate"
        n = int(self.seconds * self.sample_rate)
        yield AudioChunk(pcm16=np.full(n, level, dtype="<i2").tobytes(), sample_rate=self.sample_rate)


class FakeTransport:
    audio_in_events = True

    def __init__(self):
        self.sent = []
        self.pauses = []  # (response_id, paused) of each pause_audio

    def send(self, event, *, tag=None, on_sent=None):
        self.sent.append(event)
        if on_sent:
            on_sent(now_ns())

    def send_audio(self, pcm16, *, response_id, item_id, on_sent=None):
        self.send({"type": "response.output_audio.delta", "response_id": response_id, "item_id": item_id,
                   "delta": encode_audio(pcm16)}, tag=response_id, on_sent=on_sent)

    def audio_done(self, response_id):
        pass

    def purge(self, tag):
        return 0

    def pause_audio(self, response_id, paused):
        self.pauses.append((response_id, paused))

    def clear_audio(self, response_id):
        return False

    async def measure_rtt(self):
        return 1.5

    def types(self):
        return [e["type"] for e in self.sent]


class RecordingTransport:
    """Records every call in order: ``("event", event, tag)``, ``("audio", pcm bytes, response_id, item_id)``,
    ``("audio_done", response_id)``, ``("purge", tag)``. ``on_sent`` runs at once, or - ``delayed`` - only
    when the test calls :meth:`deliver` (a media track plays audio in real time; a socket writes later)."""

    audio_in_events = True

    def __init__(self, delayed=False):
        self.calls = []
        self.delayed = delayed
        self.pending = []  # (kind, tag, on_sent) not yet delivered

    def _sent(self, kind, tag, on_sent):
        if on_sent is None:
            return
        if self.delayed:
            self.pending.append((kind, tag, on_sent))
        else:
            on_sent(now_ns())

    def send(self, event, *, tag=None, on_sent=None):
        self.calls.append(("event", event, tag))
        self._sent("event", tag, on_sent)

    def send_audio(self, pcm16, *, response_id, item_id, on_sent=None):
        self.calls.append(("audio", bytes(pcm16), response_id, item_id))
        self._sent("audio", response_id, on_sent)

    def audio_done(self, response_id):
        self.calls.append(("audio_done", response_id))

    def pause_audio(self, response_id, paused):
        self.calls.append(("pause" if paused else "resume", response_id))

    def purge(self, tag):
        self.calls.append(("purge", tag))
        kept = [p for p in self.pending if p[1] != tag]
        dropped, self.pending = len(self.pending) - len(kept), kept
        return dropped

    async def measure_rtt(self):
        return 1.5

    def deliver(self, kind=None):
        """Run the stored ``on_sent`` callbacks (of ``kind`` only, if given), oldest first."""
        ready = [p for p in self.pending if kind is None or p[0] == kind]
        self.pending = [p for p in self.pending if p not in ready]
        for _, _, on_sent in ready:
            on_sent(now_ns())
        return len(ready)

    @property
    def events(self):
        return [c[1] for c in self.calls if c[0] == "event"]

    def types(self):
        return [c[1]["type"] if c[0] == "event" else c[0] for c in self.calls]

    def of(self, type_):
        return [e for e in self.events if e["type"] == type_]


def generative_profile():
    """cpu-tiny with the answer left to the (fake) LLM, no gate: these tests are about the session's mechanics;
    the answer's paths have tests of their own (tests/unit/answer, test_reply.py)."""
    from dataclasses import replace

    profile = load_profile(lab.profile("cpu-tiny"))
    return replace(profile, stages={k: v for k, v in profile.stages.items() if k != "answer"})


def fake_engines(**engines) -> SimpleNamespace:
    """A stack of fakes with every name of :class:`sub250.session.engines.Engines`; ``engines`` replace some
    (None where a test loads none)."""
    names = dict(profile=generative_profile(), about=None, vad_session=FakeVADSession(), asr=FakeASR(),
                 retriever=FakeRetriever(), llm=FakeLLM(), tts=FakeTTS(), end_of_turn=None, turn_model=None, picker=None,
                 tool_selector=None, vocabulary=None)
    return SimpleNamespace(**{**names, **engines})


def make_session(llm=None, retriever=None, speculative=False, include=ALL_EVENTS):
    """``include``: the client's ``session.include`` (default: every sub250 event, which the tests read)."""
    from dataclasses import replace

    from sub250.protocol import SessionConfig

    stack = fake_engines(retriever=retriever or FakeRetriever(), llm=llm or FakeLLM())
    transport = FakeTransport()
    session = RealtimeSession(stack, transport,
                              config=replace(SessionConfig(id="sess_test"), speculative_turns=speculative,
                                             include=tuple(include)))
    session.start()
    return session, transport, stack


def speech(seconds, amplitude=0.3):
    rng = np.random.default_rng(0)
    return (rng.uniform(-amplitude, amplitude, int(24000 * seconds)) * 32767).astype("<i2").tobytes()


def silence(seconds):
    return bytes(int(24000 * seconds) * 2)


async def feed(session, pcm, frame_ms=20):
    step = 24000 * frame_ms // 1000 * 2
    for i in range(0, len(pcm), step):
        ev = parse_client_event('{"type": "input_audio_buffer.append", "audio": "%s"}' % encode_audio(pcm[i:i + step]))
        await session.handle(ev, time.perf_counter_ns())


async def wait_for(transport, type_, n=1, timeout=5.0):
    for _ in range(int(timeout / 0.01)):
        if transport.types().count(type_) >= n:
            return [e for e in transport.sent if e["type"] == type_]
        await asyncio.sleep(0.01)
    raise AssertionError(f"no {type_} in {transport.types()}")


async def wait_until(predicate, timeout=5.0, what="the condition"):
    """Poll ``predicate`` on the loop (each turn lets other tasks run) until it holds."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.002)
