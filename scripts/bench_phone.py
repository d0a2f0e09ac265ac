#!/usr/bin/env python
"""The phone paths against the WebSocket path: the replay corpus through Twilio Media Streams and through SIP
(Debian's baresip calling, G.711 μ-law at 8 kHz) and through /v1/realtime at 24 kHz PCM, on one server,
interleaved (issue #34).

    .venv/bin/python scripts/bench_phone.py [--corpus all] [--turns 16] [--rounds 2] [--out reports/phone]

Loads the engines once (the default profile, or SUB250_PROFILE) and serves them in this process with Twilio (a
random auth token) and SIP (a free port on 127.0.0.1) on: each utterance is one call of its own on each path,
the order of the paths turning from one utterance to the next, one call at a time. A Twilio call is driven as
Twilio drives it (scripts/bench/phone.py: the signed webhook, then the stream at the real pace, marks echoed as
played), a SIP call by baresip (scripts/bench/softphone.py); a phone call's latency ledger is the one the call
keeps (``PhoneCall.turns``: the same ``sub250.turn.latency`` a WebSocket client gets), its transcript the
session's.
Prints a table per path and round (voice_to_voice, ttft, endpoint_delay, WER against the references) and writes
rows.jsonl and summary.json under --out.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import secrets
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from scripts.bench import phone  # noqa: E402
from scripts.bench.stats import percentile  # noqa: E402

PATHS = phone.PATHS
#: How long a call must be idle, after the utterance's audio is in, before its turn is read.
SETTLE_S = 0.5


async def phone_turn(server: Any, voice_url: str, token: str, utt: Any, n: int) -> dict[str, Any]:
    call_sid = f"CA{n:032d}"
    status, body = await phone.webhook(voice_url, token, call_sid=call_sid)
    if status != 200:
        raise SystemExit(f"bench_phone: the webhook answered {status}: {body[:200]}")
    twiml = phone.parse_twiml(body)
    async with phone.MediaStream(twiml.stream_url, call_sid, twiml.parameters) as stream:
        await stream.silence(0.3)
        await stream.say(phone.mu_law(utt.path))
        quiet = asyncio.ensure_future(stream.silence(60))
        record = await answered(server, lambda c: getattr(c, "call_sid", None) == call_sid)
        quiet.cancel()
        await stream.stop()
    return record


async def answered(server: Any, mine: Any, timeout: float = 60.0) -> dict[str, Any]:
    """The record of the utterance the call ``mine(call)`` picks, once its audio is in and the call is idle (no
    turn in flight, nothing left to play) for :data:`SETTLE_S` with a final ledger: the last turn's ledger (an
    utterance that endpointing cut in several turns is answered by its last one, as in scripts/bench/replay.py)
    and every turn's words."""
    deadline, idle_since = time.monotonic() + timeout, None
    while time.monotonic() < deadline:
        call = next((c for c in list(server.calls.values()) if mine(c)), None)
        if call is not None and call.turns and call.idle:
            idle_since = idle_since or time.monotonic()
            if time.monotonic() - idle_since >= SETTLE_S:
                users = [m["content"] for m in call.session.conversation.for_prompt() if m["role"] == "user"]
                ledger = call.turns[-1]
                return {"status": ledger.get("outcome"), "latency": ledger, "transcript": " ".join(users),
                        "server_turns": len(call.turns)}
        else:
            idle_since = None
        await asyncio.sleep(0.05)
    return {"status": "timeout"}


async def sip_turn(server: Any, utt: Any, n: int, workdir: Path) -> dict[str, Any]:
    import soundfile as sf

    from scripts.bench import softphone

    folder = workdir / f"sip{n}"
    folder.mkdir(parents=True, exist_ok=True)
    data, rate = sf.read(str(utt.path), dtype="float32", always_2d=True)
    wav = softphone.caller_wav(folder / "caller.wav", data.mean(axis=1), rate, tail_s=40)
    user = f"bench{n}"
    async with softphone.Softphone(folder, wav, user=user) as phone:
        await phone.dial(f"sip:sub250@127.0.0.1:{server.sip.port}")
        await phone.wait_for("CALL_ESTABLISHED", 10)
        record = await answered(server, lambda c: f"{user}@" in getattr(c, "remote", ""))
        await phone.hangup()
    return record


async def websocket_turn(ws_url: str, key: str, utt: Any) -> dict[str, Any]:
    from scripts.bench.replay import collect_utterance
    from sub250.sdk import RealtimeClient

    async with RealtimeClient(ws_url, key) as client:
        await client.update_session(include=["sub250.latency"])
        sender = asyncio.ensure_future(client.send_wav(str(utt.path), realtime=True, silence_after_ms=1500))
        result = await collect_utterance(client, sender, 60)
    return {"status": result.status or "no_response", "transcript": result.transcript,
            "latency": result.latency.raw if result.latency else None,
            "server_turns": getattr(result, "server_turns", 1)}


async def main(args: argparse.Namespace) -> int:
    from scripts.bench.options import corpus
    from sub250.config import Settings
    from sub250.gateway import ApiKeys, GatewayLimits
    from sub250.rag.sample import load_sample_if_empty
    from sub250.server import Server
    from sub250.stack import Stack
    from sub250.telephony.sip_agent import SipSettings
    from sub250.telephony.twilio_routes import TwilioSettings

    utts = corpus(args.corpus)[:args.turns]
    settings = Settings.from_env()
    stack = Stack.from_settings(settings)
    await stack.start(progress=lambda s: print(f"loading {s}…", file=sys.stderr))
    await load_sample_if_empty(stack.store, stack.embedder, model_id=stack.embedding_model_id)
    await stack.warm_answers()
    key, token = "sk-bench-" + secrets.token_hex(12), secrets.token_hex(16)
    server = Server("127.0.0.1", 0, keys=ApiKeys([key]), limits=GatewayLimits(), twilio=TwilioSettings(token),
                    sip=SipSettings(host="127.0.0.1", port=0))
    await server.listen()
    server.attach(stack)
    voice_url = f"http://127.0.0.1:{server.port}/v1/telephony/twilio/voice"
    ws_url = f"ws://127.0.0.1:{server.port}/v1/realtime"
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rows: list[dict[str, Any]] = []
    try:
        n = 0
        for r in range(1, args.rounds + 1):
            for i, utt in enumerate(utts):
                shift = (i + r) % len(PATHS)
                for path in PATHS[shift:] + PATHS[:shift]:
                    n += 1
                    t0 = time.monotonic()
                    if path == "twilio":
                        rec = await phone_turn(server, voice_url, token, utt, n)
                    elif path == "sip":
                        rec = await sip_turn(server, utt, n, out / "calls")
                    else:
                        rec = await websocket_turn(ws_url, key, utt)
                    rec.update(path=path, round=r, utterance=utt.id, kind=utt.kind, reference=utt.reference)
                    rows.append(rec)
                    v2v = ((rec.get("latency") or {}).get("beside") or {}).get("voice_to_voice")
                    print(f"  round {r} {utt.id:<12} {path:<9} {rec['status']:<10} voice_to_voice "
                          f"{'-' if v2v is None else f'{v2v:.0f}'} ms ({time.monotonic() - t0:.1f} s)",
                          file=sys.stderr)
                    await asyncio.sleep(0.5)
    finally:
        await server.close()
        await stack.close()
    text, summary = phone.compare(rows, args.rounds)
    print(text)
    for path in PATHS:
        v2v = [v for t in rows if t["path"] == path and t.get("status") == "completed"
               and (v := ((t.get("latency") or {}).get("beside") or {}).get("voice_to_voice")) is not None]
        summary[f"{path}/all_rounds_voice_to_voice_p50"] = percentile(v2v, 50)
    (out / "rows.jsonl").write_text("".join(json.dumps(t) + "\n" for t in rows))
    (out / "summary.json").write_text(json.dumps({"args": vars(args), "summary": summary}, indent=1, default=str))
    print(f"wrote {out}/rows.jsonl and summary.json")
    return 0


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--corpus", default="all", help="synthetic, real, all, or a manifest")
    p.add_argument("--turns", type=int, default=16, help="utterances per path and round")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--out", default="reports/phone")
    sys.exit(asyncio.run(main(p.parse_args())))
