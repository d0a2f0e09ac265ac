"""Replay recorded audio through N concurrent sessions over the public protocol and report latency.

Library side of ``scripts/replay.py``: ``run_replay`` streams each utterance at real-time pace (or
``speed`` times faster), waits for the reply, and records every turn (the server's
``sub250.turn.latency`` plus the client's own clock) as one JSON line.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from app.bench.corpus import Utterance
from app.sdk import RealtimeClient
from app.sdk.client import ConnectionLost


@dataclass
class ReplayConfig:
    url: str
    key: str | None
    label: str = "normal"
    sessions: int = 1
    turns: int = 4              # per session
    duration_s: float | None = None
    speed: float = 1.0
    timeout_s: float = 120.0
    pause_s: float = 0.5        # between a reply and the next question
    session_update: dict[str, Any] = field(default_factory=dict)


async def _client_rtt(client: RealtimeClient) -> float | None:
    try:
        waiter = await client.ws.ping()
        return float(await asyncio.wait_for(waiter, 5)) * 1000
    except Exception:
        return None


async def run_session(cfg: ReplayConfig, index: int, utts: list[Utterance], sink: Callable[[dict], None],
                      stop: asyncio.Event, deadline: float | None) -> None:
    client = RealtimeClient(cfg.url, cfg.key)
    await client.connect()
    if cfg.session_update:
        await client.update_session(**cfg.session_update)
    try:
        turn = 0
        while not stop.is_set():
            if deadline is None and turn >= cfg.turns:
                break
            if deadline is not None and time.monotonic() >= deadline:
                break
            utt = utts[(index + turn * cfg.sessions) % len(utts)]
            record: dict[str, Any] = {"label": cfg.label, "sessions": cfg.sessions, "session": index, "turn": turn,
                                      "utterance": utt.id, "kind": utt.kind, "reference": utt.reference,
                                      "started_at": time.time()}
            rtt = await _client_rtt(client)
            sender = asyncio.ensure_future(client.send_wav(str(utt.path), realtime=True, speed=cfg.speed,
                                                           silence_after_ms=1500))
            try:
                result = await client.collect_turn(timeout=cfg.timeout_s)
                last_speech_ns = await sender
                record.update(status=result.status or "no_response", transcript=result.transcript,
                              reply=result.reply, errors=[e.data["error"] for e in result.errors],
                              sources=[s["title"] for s in result.sources],
                              latency=result.latency.raw if result.latency else None,
                              reply_audio_s=round(result.audio_seconds, 3))
                committed = next((e.received_ns for e in result.events if e.type == "input_audio_buffer.committed"),
                                 None)
                client_m: dict[str, float | None] = {"rtt": rtt}
                if committed and result.first_text_ns and rtt is not None:
                    client_m["ttft_client"] = (result.first_text_ns - committed) / 1e6 + rtt
                if result.first_audio_ns:
                    client_m["voice_to_voice"] = (result.first_audio_ns - last_speech_ns) / 1e6
                record["client"] = client_m
            except (asyncio.TimeoutError, ConnectionLost) as exc:
                sender.cancel()
                record.update(status="timeout" if isinstance(exc, asyncio.TimeoutError) else "lost",
                              errors=[{"message": str(exc)}])
                sink(record)
                await client.reconnect()  # start clean: the old session may still be mid-turn
                if cfg.session_update:
                    await client.update_session(**cfg.session_update)
                turn += 1
                continue
            sink(record)
            turn += 1
            await asyncio.sleep(cfg.pause_s)
    finally:
        await client.close()


async def run_replay(cfg: ReplayConfig, utts: list[Utterance], sink: Callable[[dict], None],
                     stop: asyncio.Event | None = None) -> None:
    stop = stop or asyncio.Event()
    deadline = time.monotonic() + cfg.duration_s if cfg.duration_s else None
    await asyncio.gather(*(run_session(cfg, i, utts, sink, stop, deadline) for i in range(cfg.sessions)))


def write_jsonl(path: Path, turns: list[dict]) -> None:
    path.write_text("".join(json.dumps(t) + "\n" for t in turns))


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
