"""A remote vLLM (or any OpenAI-compatible) server, streamed through the ``openai`` client.

For GPU deployments: ``vllm serve MODEL --speculative-config ... --enable-prefix-caching`` on the GPU
box(es), and this backend in the app servers (profile ``remote-vllm`` or ``backend = "openai"``).
"""

from __future__ import annotations

import time
from collections.abc import AsyncGenerator
from typing import Any

from sub250.errors import EngineError
from sub250.llm.base import LLMEngine, LLMRequest, TokenDelta


class OpenAIRemoteEngine(LLMEngine):
    name = "openai-remote"

    def __init__(self, cfg: dict[str, Any], settings: Any) -> None:
        self.cfg = cfg
        self.base_url = getattr(settings, "llm_base_url", "") or cfg.get("base_url", "")
        self.api_key = getattr(settings, "llm_api_key", "") or cfg.get("api_key", "EMPTY")
        self.model = getattr(settings, "llm_served_name", "") or cfg.get("served_name", "")
        self.client: Any = None
        self._streams: dict[str, Any] = {}
        self.load_seconds: float | None = None

    async def start(self) -> None:
        from openai import AsyncOpenAI

        if not self.base_url:
            raise EngineError("the remote LLM backend has no base_url",
                              "set base_url in the profile's [llm] table or SUB250_LLM_BASE_URL")
        t0 = time.perf_counter()
        self.client = AsyncOpenAI(base_url=self.base_url, api_key=self.api_key, max_retries=0, timeout=30.0)
        try:
            models = await self.client.models.list()
        except Exception as exc:
            raise EngineError(f"the remote LLM server at {self.base_url} does not answer: {type(exc).__name__}: {exc}",
                              "start it (python -m vllm.entrypoints.openai.api_server ...) or fix base_url") from None
        names = [m.id for m in models.data]
        if not self.model:
            self.model = names[0] if names else ""
        elif self.model not in names:
            raise EngineError(f"the remote LLM server serves {names}, not {self.model!r}",
                              "set served_name in the profile to one of those")
        self.load_seconds = time.perf_counter() - t0

    def tokenize(self, messages: list[dict[str, str]]) -> list[int]:
        return []  # the remote server applies the chat template and tokenizes

    async def stream(self, request: LLMRequest) -> AsyncGenerator[TokenDelta, None]:
        from openai import omit

        try:
            stream = await self.client.chat.completions.create(
                model=self.model, messages=request.messages, max_tokens=request.max_tokens,
                temperature=request.temperature, stream=True, stream_options={"include_usage": True},
                frequency_penalty=request.frequency_penalty,
                # vLLM's own parameters, outside the OpenAI schema
                extra_body=_vllm_extras(request),
                # structured outputs the OpenAI way (vLLM's server guides decoding by it)
                response_format={"type": "json_schema", "json_schema": {"name": "output", "schema": request.json_schema}}
                if request.json_schema is not None else omit,
            )
        except Exception as exc:
            raise EngineError(f"remote LLM request failed: {type(exc).__name__}: {exc}") from exc
        self._streams[request.request_id] = stream
        n = 0
        finished = False
        try:
            async for chunk in stream:
                if chunk.usage is not None and not chunk.choices:
                    cached = getattr(getattr(chunk.usage, "prompt_tokens_details", None), "cached_tokens", None)
                    yield TokenDelta("", chunk.usage.completion_tokens, finished=True, finish_reason="stop",
                                     prompt_tokens=chunk.usage.prompt_tokens, cached_prompt_tokens=cached)
                    finished = True
                    continue
                if not chunk.choices:
                    continue
                choice = chunk.choices[0]
                text = choice.delta.content or ""
                if text:
                    n += 1  # one chunk per engine step; exact counts arrive with usage
                yield TokenDelta(text, n, finished=False, finish_reason=choice.finish_reason)
        except Exception as exc:
            if not finished:
                raise EngineError(f"remote LLM stream broke: {type(exc).__name__}: {exc}") from exc
        finally:
            self._streams.pop(request.request_id, None)
            if not finished:
                await stream.close()  # closing the HTTP stream makes vLLM abort the request

    async def abort(self, request_id: str) -> None:
        stream = self._streams.pop(request_id, None)
        if stream is not None:
            await stream.close()

    async def close(self) -> None:
        if self.client is not None:
            await self.client.close()

    def describe(self) -> dict[str, Any]:
        return {"engine": f"OpenAI-compatible server at {self.base_url}", "model": self.model}


def _vllm_extras(request: LLMRequest) -> dict | None:
    """vLLM's sampling parameters outside the OpenAI schema: ``repetition_penalty`` and the choice grammar."""
    extra: dict = {}
    if request.repetition_penalty != 1.0:
        extra["repetition_penalty"] = request.repetition_penalty
    if request.choice:
        extra["structured_outputs"] = {"choice": list(request.choice)}
    return extra or None
