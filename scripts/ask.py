#!/usr/bin/env python
"""Ask the server a spoken question from a WAV file and print transcript, reply and latency table.

    .venv/bin/python scripts/ask.py QUESTION.wav [--url ws://127.0.0.1:8250/v1/realtime] [--key KEY]
                                   [--save-reply reply.wav] [--text "typed question instead"]

The API key defaults to $SUB250_API_KEY, else the local key `serve` created (~/.local/share/sub250/api_keys).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sub250.sdk import RealtimeClient  # noqa: E402


def default_key() -> str | None:
    if os.environ.get("SUB250_API_KEY"):
        return os.environ["SUB250_API_KEY"]
    home = Path(os.environ.get("SUB250_HOME") or Path(os.environ.get("XDG_DATA_HOME") or Path.home() / ".local/share") / "sub250")
    keys = home / "api_keys"
    if keys.exists():
        for line in keys.read_text().splitlines():
            if line.strip() and not line.startswith("#"):
                return line.strip()
    return None


async def main(args: argparse.Namespace) -> int:
    async with RealtimeClient(args.url, args.key or default_key()) as client:
        if args.text:
            t0 = time.perf_counter_ns()
            await client.send_text(args.text)
            result = await client.collect_turn(timeout=args.timeout)
        else:
            sender = asyncio.ensure_future(client.send_wav(args.wav, realtime=not args.fast))
            result = await client.collect_turn(timeout=args.timeout)
            t0 = await sender
    print(f"you said : {result.transcript}")
    print(f"assistant: {result.reply}")
    if result.sources:
        print("sources  : " + "; ".join(f"{s['title']} ({s['source']}, {s['score']:.2f})" for s in result.sources))
    print(f"status   : {result.status}; {result.audio_seconds:.1f} s of reply audio")
    for e in result.errors:
        print(f"error    : {e.data['error']['code']}: {e.data['error']['message']}")
    if result.latency:
        print("\nlatency (server marks, ms):")
        print(result.latency.table())
        if result.first_audio_ns and not args.text:
            print(f"\nclient-measured: last speech frame sent -> first reply audio = "
                  f"{(result.first_audio_ns - t0) / 1e6:.0f} ms")
    if args.save_reply and result.audio:
        import numpy as np
        import soundfile as sf

        sf.write(args.save_reply, np.frombuffer(bytes(result.audio), dtype="<i2"), 24000, subtype="PCM_16")
        print(f"reply audio saved to {args.save_reply}")
    return 0 if result.status == "completed" else 1


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("wav", nargs="?")
    p.add_argument("--url", default=os.environ.get("SUB250_URL", "ws://127.0.0.1:8250/v1/realtime"))
    p.add_argument("--key")
    p.add_argument("--text", help="send a typed question instead of audio")
    p.add_argument("--fast", action="store_true", help="stream the WAV as fast as possible")
    p.add_argument("--save-reply")
    p.add_argument("--timeout", type=float, default=60.0)
    a = p.parse_args()
    if not a.wav and not a.text:
        p.error("give a WAV file or --text")
    raise SystemExit(asyncio.run(main(a)))
