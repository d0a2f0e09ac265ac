#!/usr/bin/env python
"""What one caller's audio frame costs the event loop: CPU time of the loop's own thread per 20 ms
``input_audio_buffer.append`` frame, from the text frame to the session's handler returning (parsing included, the
gateway's checks excluded, the session: input buffer, VAD decisions, partial transcripts started).

    .venv/bin/python scripts/bench_frame_cost.py [--seconds 30] [--wav tests/data/audio/goforward.wav] [--out F]

The real Silero VAD and Whisper engines run on their own threads, as in the server; their CPU time is not the
loop's and is not counted (``time.thread_time_ns`` of the loop thread only). Turns are committed by server VAD
with ``create_response`` off, so no reply work is mixed in. Prints p50 / p95 / p99 / mean per frame (µs) and
the loop's CPU share of real time, and writes them as JSON.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from sub250.audio.pcm import float32_to_pcm16, load_audio  # noqa: E402
from sub250.audio.rates import INPUT_RATE  # noqa: E402
from sub250.config import Settings  # noqa: E402
from sub250.protocol import parse_client_event  # noqa: E402
from sub250.session import RealtimeSession  # noqa: E402
from sub250.stack import Stack  # noqa: E402

FRAME_MS = 20


class NullTransport:
    def send(self, event: dict[str, Any], *, tag: str | None = None, on_sent: Any = None) -> None:
        if on_sent is not None:
            on_sent(time.perf_counter_ns())

    def send_audio(self, pcm16: Any, *, response_id: str, item_id: str, on_sent: Any = None) -> None:
        pass

    def audio_done(self, response_id: str) -> None:
        pass

    def purge(self, tag: str) -> int:
        return 0

    async def measure_rtt(self) -> float | None:
        return None


def frames(wav: Path, seconds: float) -> list[str]:
    """Speech, a pause, speech again… as JSON append events of 20 ms at 24 kHz."""
    speech = load_audio(str(wav), INPUT_RATE)
    pause = np.zeros(int(0.8 * INPUT_RATE), dtype=np.float32)
    audio = np.zeros(0, dtype=np.float32)
    while audio.size < seconds * INPUT_RATE:
        audio = np.concatenate([audio, speech, pause])
    pcm = float32_to_pcm16(audio[: int(seconds * INPUT_RATE)])
    step = INPUT_RATE * FRAME_MS // 1000 * 2
    return [json.dumps({"type": "input_audio_buffer.append", "audio": base64.b64encode(pcm[i:i + step]).decode()})
            for i in range(0, len(pcm) - step + 1, step)]


async def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seconds", type=float, default=30.0)
    p.add_argument("--wav", type=Path, default=REPO / "tests" / "data" / "audio" / "goforward.wav")
    p.add_argument("--out", type=Path, default=REPO / "reports" / "frame-cost.json")
    args = p.parse_args()
    stack = Stack.from_settings(Settings.from_env())
    await stack.start(("vad", "asr"))
    session = RealtimeSession(stack, NullTransport())
    session.start()
    update = parse_client_event(json.dumps({"type": "session.update", "session": {"audio": {"input": {
        "turn_detection": {"type": "server_vad", "create_response": False}}}}}))
    await session.handle(update, time.perf_counter_ns())
    raws = frames(args.wav, args.seconds)
    costs: list[float] = []
    t_start = time.perf_counter()
    for i, raw in enumerate(raws):
        due = t_start + i * FRAME_MS / 1000  # real-time pace, as a caller sends
        if (wait := due - time.perf_counter()) > 0:
            await asyncio.sleep(wait)
        c0 = time.thread_time_ns()
        await session.handle(parse_client_event(raw), time.perf_counter_ns())
        costs.append((time.thread_time_ns() - c0) / 1000)
    wall = time.perf_counter() - t_start
    await session.close()
    await stack.close()
    q = statistics.quantiles(costs, n=100)
    result = {"frames": len(costs), "frame_ms": FRAME_MS, "p50_us": round(q[49], 1), "p95_us": round(q[94], 1),
              "p99_us": round(q[98], 1), "mean_us": round(statistics.fmean(costs), 1),
              "loop_cpu_share": round(sum(costs) / 1e6 / wall, 4), "turns": session.stats.turns}
    print(f"{'frames':>8} {'p50 µs':>8} {'p95 µs':>8} {'p99 µs':>8} {'mean µs':>8} {'loop CPU':>9} {'turns':>6}")
    print(f"{result['frames']:>8} {result['p50_us']:>8} {result['p95_us']:>8} {result['p99_us']:>8} "
          f"{result['mean_us']:>8} {result['loop_cpu_share']:>8.2%} {result['turns']:>6}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    asyncio.run(main())
