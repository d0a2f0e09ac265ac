"""``sub250 doctor``: load every engine on its own, print its version, load time and one timed call.

Exit status is non-zero when any stage failed, and the failing stages are named. The same probes
serve ``scripts/bench_engines.py`` (which calls each many times).
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from sub250.audio.rates import ASR_RATE
from sub250.config import Settings
from sub250.errors import Sub250Error
from sub250.stack import Stack

PROBE_SENTENCE = "Press the power button for three seconds to turn on the purifier."
PROBE_QUESTION = "How often should I replace the filter?"


@dataclass
class ProbeResult:
    ms: float
    note: str
    extra: dict[str, float] = field(default_factory=dict)


def rss_mb(include_children: bool = True) -> float:
    import psutil

    proc = psutil.Process()
    total = proc.memory_info().rss
    if include_children:
        for child in proc.children(recursive=True):
            try:
                total += child.memory_info().rss
            except psutil.Error:
                pass
    return total / 2**20


async def probe_db(stack: Stack) -> ProbeResult:
    vec = np.random.default_rng(0).standard_normal(384).astype(np.float32)
    vec /= np.linalg.norm(vec)
    store = stack.store
    assert store is not None
    t0 = time.perf_counter()
    rows = await store.search(vec, 3)
    ms = (time.perf_counter() - t0) * 1000
    return ProbeResult(ms, f"HNSW top-3 over {await store.count()} chunks ({len(rows)} returned)")


async def probe_vad(stack: Stack) -> ProbeResult:
    from sub250.audio.vad import WINDOW, SileroVAD

    vad = SileroVAD(stack.vad_session)
    audio = np.zeros(WINDOW, dtype=np.float32)
    t0 = time.perf_counter()
    p = await asyncio.to_thread(vad.probability, audio)
    return ProbeResult((time.perf_counter() - t0) * 1000, f"one 32 ms window, p(speech|silence)={p:.2f}")


_probe_audio: dict[str, np.ndarray] = {}


def _spoken_probe(stack: Stack) -> np.ndarray:
    """The probe sentence spoken by the TTS voice, at 16 kHz (silence if no TTS is loaded)."""
    if "audio" not in _probe_audio:
        from sub250.audio.pcm import pcm16_to_float32, resample

        if stack.tts is not None:
            chunks = list(stack.tts.synthesize(PROBE_SENTENCE))
            pcm = b"".join(c.pcm16 for c in chunks)
            _probe_audio["audio"] = resample(pcm16_to_float32(pcm), chunks[0].sample_rate, ASR_RATE)
        else:
            _probe_audio["audio"] = np.zeros(ASR_RATE * 3, dtype=np.float32)
    return _probe_audio["audio"]


async def probe_asr(stack: Stack) -> ProbeResult:
    assert stack.asr is not None
    audio = await asyncio.to_thread(_spoken_probe, stack)
    t0 = time.perf_counter()
    tr = await asyncio.to_thread(stack.asr.transcribe, audio)
    ms = (time.perf_counter() - t0) * 1000
    return ProbeResult(ms, f"{tr.audio_seconds:.1f} s of speech -> {tr.text[:60]!r}")


async def probe_embedder(stack: Stack) -> ProbeResult:
    assert stack.embedder is not None
    t0 = time.perf_counter()
    v = await asyncio.to_thread(stack.embedder.embed_one, PROBE_QUESTION)
    return ProbeResult((time.perf_counter() - t0) * 1000, f"one query -> {v.shape[0]}-d unit vector")


async def probe_llm(stack: Stack) -> ProbeResult:
    from sub250.llm import LLMRequest

    msgs = [{"role": "system", "content": "You are a support agent. Answer in one short sentence."},
            {"role": "user", "content": "How often should I replace the air filter of my purifier?"}]
    assert stack.llm is not None
    t0 = time.perf_counter()
    first = None
    last = None
    async for d in stack.llm.stream(LLMRequest(f"doctor-{uuid.uuid4().hex[:8]}", msgs, max_tokens=48)):
        if first is None and d.text:
            first = time.perf_counter()
        last = d
    end = time.perf_counter()
    ttft = ((first or end) - t0) * 1000
    n = last.num_tokens if last else 0
    tps = (n - 1) / (end - first) if first and n > 1 and end > first else 0.0
    spec = last.spec_decoding if last else None
    acc = (f", spec acceptance {spec['num_accepted_draft_tokens']}/{spec['num_draft_tokens']}"
           if spec and spec.get("num_draft_tokens") else "")
    extra = {"tokens": float(n), "tokens_per_s": tps}
    if spec and spec.get("num_draft_tokens"):
        extra["spec_acceptance"] = spec["num_accepted_draft_tokens"] / spec["num_draft_tokens"]
    return ProbeResult(ttft, f"TTFT; {n} tokens at {tps:.0f} tok/s{acc}", extra)


async def probe_tts(stack: Stack) -> ProbeResult:
    assert stack.tts is not None
    t0 = time.perf_counter()
    it = iter(stack.tts.synthesize(PROBE_SENTENCE))
    first = await asyncio.to_thread(next, it)
    ms = (time.perf_counter() - t0) * 1000
    return ProbeResult(ms, f"first sentence: {first.seconds:.2f} s of audio at {first.sample_rate} Hz")


PROBES: dict[str, Callable[[Stack], Awaitable[ProbeResult]]] = {
    "db": probe_db,
    "vad": probe_vad,
    "asr": probe_asr,
    "embedder": probe_embedder,
    "llm": probe_llm,
    "tts": probe_tts,
}

# Load order: TTS before ASR so the ASR probe can transcribe real speech.
ORDER = ("db", "vad", "embedder", "tts", "asr", "llm")


def describe(stack: Stack, stage: str) -> str:
    try:
        if stage == "db":
            return "PostgreSQL + pgvector " + ("(embedded)" if stack.pg else "(DATABASE_URL)")
        if stage == "vad":
            import onnxruntime

            return f"Silero VAD (onnxruntime {onnxruntime.__version__})"
        obj: Any = {"asr": stack.asr, "embedder": stack.embedder, "llm": stack.llm, "tts": stack.tts}[stage]
        return obj.describe()["engine"]
    except Exception as exc:  # describing must never hide the result
        return f"? ({exc})"


async def _db_version(stack: Stack) -> str:
    async with stack.pool.acquire() as conn:
        pg = await conn.fetchval("SHOW server_version")
        vec = await conn.fetchval("SELECT extversion FROM pg_extension WHERE extname = 'vector'")
    return f"PostgreSQL {pg} + pgvector {vec} " + ("(embedded)" if stack.pg else "(DATABASE_URL)")


async def run_doctor(settings: Settings) -> int:
    stack = Stack.from_settings(settings)
    print(f"sub250 doctor: profile {stack.profile.name!r}, home {settings.home}\n")
    rows: list[tuple[str, str, str, str, str]] = []
    failed: list[str] = []
    try:
        for stage in ORDER:
            print(f"  {stage}: loading…", flush=True)
            try:
                mem0 = rss_mb()
                t0 = time.perf_counter()
                await stack.start((stage,))
                load_s = time.perf_counter() - t0
                mem = rss_mb() - mem0
                result = await PROBES[stage](stack)
                version = await _db_version(stack) if stage == "db" else describe(stack, stage)
                rows.append((stage, version, f"{load_s:.1f}", f"{result.ms:.0f}", f"+{mem:.0f} MB; {result.note}"))
            except Sub250Error as exc:
                failed.append(stage)
                rows.append((stage, "FAILED", "-", "-", str(exc).replace("\n", " ")))
            except Exception as exc:
                failed.append(stage)
                rows.append((stage, "FAILED", "-", "-", f"{type(exc).__name__}: {exc}"))
    finally:
        try:
            await stack.close()
        except Sub250Error as exc:
            print(f"warning: {exc}")
    print()
    header = ("stage", "engine", "load s", "call ms", "notes")
    widths = [max(len(r[i]) for r in rows + [header]) for i in range(4)]
    print("  ".join(h.ljust(w) for h, w in zip(header[:4], widths, strict=True)) + "  " + header[4])
    for r in rows:
        print("  ".join(c.ljust(w) for c, w in zip(r[:4], widths, strict=True)) + "  " + r[4])
    print()
    if failed:
        print(f"doctor: FAILED: {', '.join(failed)}")
        return 1
    print("doctor: every engine works")
    return 0
