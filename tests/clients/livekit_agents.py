"""LiveKit Agents' ``openai.realtime.RealtimeModel``, unchanged, pointed at sub250: one KB question answered
with audio; its session's ``error`` events and the library's warnings and errors counted.

Run by ``tests/e2e/test_clients.py`` with the clients' venv (``scripts/install-clients.sh``). Prints one JSON
object.

    .venv-clients/bin/python tests/clients/livekit_agents.py http://127.0.0.1:8250/v1 KEY MODEL
"""

from __future__ import annotations

import asyncio
import json
import logging
import sys

import aiohttp
from livekit.agents import llm
from livekit.plugins import openai


class Kept(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.records: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(f"{record.levelname} {record.name}: {record.getMessage()[:300]}")


async def main(base_url: str, key: str, model: str) -> dict:
    kept = Kept()
    logging.getLogger("livekit").addHandler(kept)
    errors: list[str] = []
    async with aiohttp.ClientSession() as http:
        rt = openai.realtime.RealtimeModel(model=model, base_url=base_url, api_key=key, http_session=http,
                                           modalities=["audio"])
        session = rt.session()
        session.on("error", lambda ev: errors.append(str(getattr(ev, "error", ev))[:300]))
        try:
            ctx = session.chat_ctx.copy()
            ctx.add_message(role="user", content="How long does the filter last?")
            await session.update_chat_ctx(ctx)
            await session.update_instructions("You are Ava, a friendly support agent for Halden Labs.")
            created = await asyncio.wait_for(session.generate_reply(), 60)
            text, frames, samples = "", 0, 0

            async def read_text(stream) -> None:
                nonlocal text
                async for piece in stream:
                    text += str(piece)

            async def read_audio(stream) -> None:
                nonlocal frames, samples
                async for frame in stream:
                    frames += 1
                    samples += frame.samples_per_channel

            async def read() -> None:
                async for message in created.message_stream:
                    await asyncio.gather(read_text(message.text_stream), read_audio(message.audio_stream))

            await asyncio.wait_for(read(), 120)
        finally:
            await session.aclose()
    return {"errors": errors, "logged": kept.records, "reply": text, "audio_frames": frames,
            "audio_seconds": samples / 24000}


if __name__ == "__main__":
    print(json.dumps(asyncio.run(main(*sys.argv[1:4]))))
