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

from scripts.bench.corpus import Utterance
from sub250.sdk import RealtimeClient, TurnResult
from sub250.sdk.client import ConnectionLost


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
    first_turn: int = 0         # numbering (and corpus position) continues across interleaved rounds
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
            number = cfg.first_turn + turn
            utt = utts[(index + number * cfg.sessions) % len(utts)]
            record: dict[str, Any] = {"label": cfg.label, "sessions": cfg.sessions, "session": index, "turn": number,
                                      "utterance": utt.id, "kind": utt.kind, "reference": utt.reference,
                                      "started_at": time.time()}
            rtt = await _client_rtt(client)
            sender = asyncio.ensure_future(client.send_wav(str(utt.path), realtime=True, speed=cfg.speed,
                                                           silence_after_ms=1500))
            try:
                result = await collect_utterance(client, sender, cfg.timeout_s)
                last_speech_ns = sender.result()
                record.update(status=result.status or "no_response", transcript=result.transcript,
                              server_turns=getattr(result, "server_turns", 1),
                              reply=result.reply, errors=[e.data["error"] for e in result.errors],
                              sources=[s["title"] for s in result.sources],
                              latency=result.latency.raw if result.latency else None,
                              reply_audio_s=round(result.audio_seconds, 3))
                committed = next((e.received_ns for e in reversed(result.events)
                                  if e.type == "input_audio_buffer.committed"), None)
                client_m: dict[str, float | None] = {"rtt": rtt}
                if committed and result.first_text_ns and rtt is not None:
                    client_m["ttft_client"] = (result.first_text_ns - committed) / 1e6 + rtt
                stopped = next((e for e in reversed(result.events) if e.type == "input_audio_buffer.speech_stopped"),
                               None)
                speech_end_ns = client.sent_at(stopped.data["audio_end_ms"]) if stopped else None
                if result.first_audio_ns and speech_end_ns:
                    # from sending the frame the server judged the end of speech, to hearing the reply
                    client_m["voice_to_voice"] = (result.first_audio_ns - speech_end_ns) / 1e6
                if result.first_audio_ns:
                    client_m["file_end_to_audio"] = (result.first_audio_ns - last_speech_ns) / 1e6
                    audio_item = next(e.data.get("item_id", "") for e in reversed(result.events)
                                      if e.type == "response.output_audio.delta")
                    # what a real-time player of the reply heard as silence between its deltas
                    client_m["audio_stall"] = client.playback.stalled(audio_item)
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


async def collect_utterance(client: RealtimeClient, sender: asyncio.Task, timeout: float) -> TurnResult:
    """Events of one utterance until the server has answered all of it.

    Endpointing may split an utterance with long pauses into several server turns (each later part
    barging in on the reply to the earlier one); the utterance is done when its audio has been sent and
    every committed turn has its ``response.done`` and final latency report. The result's figures are
    those of the last server turn (the one that answered the whole utterance); ``server_turns`` counts them.
    """
    result = TurnResult()
    deadline = time.monotonic() + timeout
    committed = done = finals = 0
    quiet_since = None
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise asyncio.TimeoutError(f"utterance not answered after {timeout:.0f} s")
        try:
            ev = await client.next_event(timeout=min(remaining, 0.25))
        except asyncio.TimeoutError:
            if sender.done() and committed and done >= committed:
                quiet_since = quiet_since or time.monotonic()
                if finals >= done or time.monotonic() - quiet_since > 2.0:
                    break
            continue
        quiet_since = None
        t = ev.type
        if t == "input_audio_buffer.committed":
            committed += 1  # a new server turn: its reply replaces the previous (cancelled) one
            result.reply, result.audio, result.first_text_ns, result.first_audio_ns = "", bytearray(), 0, 0
        heard = result.transcript
        result.absorb(ev)
        if t == "conversation.item.input_audio_transcription.completed":
            result.transcript = " ".join(x for x in (heard, result.transcript) if x)
        elif t == "response.done":
            done += 1
        elif t == "sub250.turn.latency" and ev.data.get("final"):
            finals += 1
        if sender.done() and committed and done >= committed and finals >= done:
            break
    result.server_turns = committed  # type: ignore[attr-defined]
    return result


async def run_replay(cfg: ReplayConfig, utts: list[Utterance], sink: Callable[[dict], None],
                     stop: asyncio.Event | None = None) -> None:
    stop = stop or asyncio.Event()
    deadline = time.monotonic() + cfg.duration_s if cfg.duration_s else None
    await asyncio.gather(*(run_session(cfg, i, utts, sink, stop, deadline) for i in range(cfg.sessions)))


def write_jsonl(path: Path, turns: list[dict]) -> None:
    path.write_text("".join(json.dumps(t) + "\n" for t in turns))


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
