"""The OpenAI Agents SDK's ``RealtimeRunner``, unchanged, pointed at sub250: three turns, every event counted.

Run by ``tests/e2e/test_clients.py`` with the clients' venv (``.venv-clients``, made by
``scripts/install-clients.sh``: openai-agents 0.24 needs websockets < 17, which the server's venv cannot
have). Prints one JSON object: the events by type, the errors, the tool calls, and each turn's reply.

    .venv-clients/bin/python tests/clients/agents_sdk.py ws://127.0.0.1:8250/v1/realtime KEY question.pcm
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections import Counter

from agents import function_tool
from agents.realtime import RealtimeAgent, RealtimeRunner

CALLS: list[str] = []
INSTRUCTIONS = "You are Ava, a friendly support agent for Halden Labs. Keep your answers short."


@function_tool
def lookup_order(order_number: str) -> str:
    """Look up the status of a customer's order by its order number."""
    CALLS.append(order_number)
    return json.dumps({"order_number": order_number, "status": "shipped", "arrives": "Thursday"})


def replies(history) -> list[str]:
    out = []
    for item in history:
        if getattr(item, "role", None) == "assistant":
            out.append(" ".join(getattr(c, "transcript", None) or getattr(c, "text", None) or ""
                                for c in item.content).strip())
    return out


async def main(url: str, key: str, pcm_path: str) -> dict:
    agent = RealtimeAgent(name="Ava", instructions=INSTRUCTIONS, tools=[lookup_order])
    runner = RealtimeRunner(agent)
    types: Counter[str] = Counter()
    raw_types: Counter[str] = Counter()
    errors: list[str] = []
    turns: list[dict] = []
    audio_bytes = 0
    history: list = []  # the SDK's own view of the conversation, from its history_updated events
    session = await runner.run(model_config={"url": url, "api_key": key})
    async with session:
        events = session.__aiter__()

        async def turn(label: str, send, ends_after: int = 1) -> None:
            nonlocal audio_bytes, history
            await send()
            ended = 0
            got_audio = 0
            while ended < ends_after:
                ev = await asyncio.wait_for(events.__anext__(), timeout=120)
                types[ev.type] += 1
                if ev.type == "raw_model_event":
                    raw_types[ev.data.type] += 1
                elif ev.type == "error":
                    errors.append(str(ev.error)[:300])
                elif ev.type == "audio":
                    got_audio += len(ev.audio.data)
                elif ev.type == "history_updated":
                    history = ev.history
                elif ev.type == "agent_end":
                    ended += 1
            audio_bytes += got_audio
            turns.append({"turn": label, "audio_bytes": got_audio, "reply": (replies(history) or [""])[-1]})

        # 1. a tool round trip by text: the call, its output, then the answer (two responses)
        await turn("tool", lambda: session.send_message("Where is my order 12345?"), ends_after=2)
        # 2. a knowledge-base question, by text, under the SDK's instructions
        await turn("kb", lambda: session.send_message("How long does the filter last?"))
        # 3. a spoken turn: a real recording, 24 kHz PCM16, in 20 ms frames, then silence for the VAD
        pcm = open(pcm_path, "rb").read() + bytes(24000 * 2 * 2)
        async def speak() -> None:
            for i in range(0, len(pcm), 960):
                await session.send_audio(pcm[i:i + 960])
                await asyncio.sleep(0.02)
        await turn("spoken", speak)
        heard = [c.transcript for item in history if getattr(item, "role", None) == "user"
                 for c in item.content if getattr(c, "transcript", None)]
    return {"types": dict(types), "raw_types": dict(raw_types), "errors": errors, "calls": CALLS,
            "turns": turns, "heard": heard, "audio_bytes": audio_bytes}


if __name__ == "__main__":
    print(json.dumps(asyncio.run(main(*sys.argv[1:4]))))
