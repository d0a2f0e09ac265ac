"""Pipecat's ``OpenAIRealtimeLLMService``, unchanged, pointed at sub250 in a pipeline: one KB question answered
with audio; the pipeline's error frames and the library's logged errors counted.

Run by ``tests/e2e/test_clients.py`` with the clients' venv (``scripts/install-clients.sh``). Prints one JSON
object.

    .venv-clients/bin/python tests/clients/pipecat_realtime.py ws://127.0.0.1:8250/v1/realtime KEY MODEL
"""

from __future__ import annotations

import asyncio
import json
import sys

from loguru import logger
from pipecat.frames.frames import (EndFrame, ErrorFrame, LLMContextFrame, LLMFullResponseEndFrame, LLMTextFrame,
                                   TTSAudioRawFrame, TTSTextFrame)
from pipecat.pipeline.pipeline import Pipeline
from pipecat.pipeline.runner import PipelineRunner
from pipecat.pipeline.task import PipelineTask
from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.processors.frame_processor import FrameDirection, FrameProcessor
from pipecat.services.openai.realtime.llm import OpenAIRealtimeLLMService


class Watch(FrameProcessor):
    """Counts what passes: error frames (they travel upstream from the service), the reply's text and audio."""

    def __init__(self, on_done=None) -> None:
        super().__init__()
        self.errors: list[str] = []
        self.text, self.audio_bytes, self.on_done = "", 0, on_done

    async def process_frame(self, frame, direction: FrameDirection) -> None:
        await super().process_frame(frame, direction)
        if isinstance(frame, ErrorFrame):
            self.errors.append(str(frame.error)[:300])
        elif isinstance(frame, TTSAudioRawFrame):
            self.audio_bytes += len(frame.audio)
        elif isinstance(frame, (TTSTextFrame, LLMTextFrame)):
            self.text += frame.text
        elif isinstance(frame, LLMFullResponseEndFrame) and self.on_done is not None:
            await self.on_done()
        await self.push_frame(frame, direction)


async def main(url: str, key: str, model: str) -> dict:
    logged: list[str] = []
    logger.remove()
    logger.add(lambda m: logged.append(str(m)[:300]), level="ERROR")
    llm = OpenAIRealtimeLLMService(api_key=key, base_url=url, settings=OpenAIRealtimeLLMService.Settings(
        model=model, system_instruction="You are Ava, a friendly support agent for Halden Labs."))
    task: PipelineTask

    async def done() -> None:
        await task.queue_frame(EndFrame())

    upstream, downstream = Watch(), Watch(on_done=done)
    task = PipelineTask(Pipeline([upstream, llm, downstream]))
    await task.queue_frame(LLMContextFrame(context=LLMContext(
        messages=[{"role": "user", "content": "How long does the filter last?"}])))
    await asyncio.wait_for(PipelineRunner(handle_sigint=False).run(task), 180)
    return {"errors": upstream.errors + downstream.errors, "logged": logged, "reply": downstream.text,
            "audio_bytes": downstream.audio_bytes}


if __name__ == "__main__":
    print(json.dumps(asyncio.run(main(*sys.argv[1:4]))))
