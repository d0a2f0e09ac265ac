"""One trial of the interruption benchmark (``scripts/bench_interruptions.py``): a caller asks, the reply
starts, the caller makes a sound over it; did the reply stop, and how soon after the sound began?

A trial is one fresh session: the question (typed text, or audio at real-time pace), then - at the reply's first
audio delta - the sound, then silence as a microphone sends it. A typed question always gets the long reply the
trial needs; a spoken one is only as good as Whisper's hearing of that rendering ("how the war into works" for a
Piper "warranty works" got a one-sentence refusal, over before the sound began: a void trial). The reply counts as
*kept* when it is still going (or completed) ``settle_s`` after the sound ended; the trial then cancels it
(``response.cancel``) to move on. It counts as *cancelled* when its ``response.done`` says ``cancelled`` /
``turn_detected``; the delay is measured from the sound's first speech (the server's
``speech_started.audio_start_ms``, mapped to when this client sent that audio) to the ``response.done`` on this
client's clock. A trial whose reply completed before the sound was over is *void*: the reply had finished
generating, so nothing was paused or cancelled (a reply that finishes while paused is told only once the sound is
dismissed, after the sound).
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any

from scripts.bench.stats import percentile
from sub250.sdk import RealtimeClient

RATE = 24_000


@dataclass(frozen=True)
class Trial:
    sound: str
    check: bool  # session.sub250.interruption_check
    outcome: str  # "kept" | "cancelled" | "void" | "error"
    onset_to_done_ms: float | None = None
    detail: str = ""
    #: Which server it ran on (its profile), when the benchmark compares two.
    server: str = ""


async def run_trial(url: str, key: str | None, question: str | bytes, sound_name: str, sound: bytes, *, check: bool,
                    instructions: str, max_tokens: int = 300, settle_s: float = 1.5,
                    timeout_s: float = 90.0, server: str = "") -> Trial:
    async with RealtimeClient(url, key) as client:
        await client.update_session(instructions=instructions, max_output_tokens=max_tokens,
                                    sub250={"interruption_check": check})
        if isinstance(question, str):
            await client.send_text(question)
        else:
            await client.stream_pcm(question, realtime=True, silence_after_ms=1000)
        first = await client.wait_for("response.output_audio.delta", timeout=timeout_s)
        rid = first.data["response_id"]
        events: list[Any] = []
        done = asyncio.Event()

        async def read() -> None:
            while True:
                ev = await client.next_event(timeout=timeout_s)
                if ev.received_ns > first.received_ns:
                    events.append(ev)
                if ev.type == "response.done" and ev.data["response"]["id"] == rid:
                    done.set()
                    return

        reader = asyncio.ensure_future(read())
        try:
            await client.stream_pcm(sound, realtime=True)
            sound_end, sound_end_ns = time.monotonic(), time.perf_counter_ns()
            while not done.is_set() and time.monotonic() - sound_end < settle_s:
                await client.stream_pcm(bytes(RATE * 2 // 50), realtime=True)  # 20 ms of a quiet microphone
            if done.is_set():
                reply = next(e for e in events if e.type == "response.done" and e.data["response"]["id"] == rid)
                status = reply.data["response"]["status"]
                if status != "cancelled":
                    # done before the sound was over: the reply had finished, nothing was paused or talked over
                    # (a reply that finishes while paused is told only once the sound is dismissed)
                    return Trial(sound_name, check, "kept" if reply.received_ns > sound_end_ns else "void",
                                 detail=status, server=server)
                started = [e for e in events if e.type == "input_audio_buffer.speech_started"]
                onset = client.sent_at(started[-1].data["audio_start_ms"]) if started else None
                delay = (reply.received_ns - onset) / 1e6 if onset is not None else None
                return Trial(sound_name, check, "cancelled", delay, server=server)
            await client.cancel_response()
            await asyncio.wait_for(done.wait(), timeout=timeout_s)
            return Trial(sound_name, check, "kept", server=server)
        finally:
            reader.cancel()


def summarize(trials: list[Trial]) -> list[dict[str, Any]]:
    """One row per sound and setting (server, check on / off), in the order they first ran (check on first)."""
    rows = []
    servers = list(dict.fromkeys(t.server for t in trials))
    settings = sorted({(t.server, t.check) for t in trials}, key=lambda s: (servers.index(s[0]), not s[1]))
    for sound in dict.fromkeys(t.sound for t in trials):
        for server, check in settings:
            these = [t for t in trials if t.sound == sound and t.check == check and t.server == server]
            valid = [t for t in these if t.outcome in ("kept", "cancelled")]
            delays = [t.onset_to_done_ms for t in valid if t.onset_to_done_ms is not None]
            rows.append({
                "sound": sound, "server": server, "check": check, "trials": len(these), "valid": len(valid),
                "cancelled": sum(t.outcome == "cancelled" for t in valid),
                "cancelled_share": (sum(t.outcome == "cancelled" for t in valid) / len(valid)) if valid else None,
                "onset_to_done_p50_ms": percentile(delays, 50), "onset_to_done_max_ms": max(delays, default=None),
            })
    return rows
