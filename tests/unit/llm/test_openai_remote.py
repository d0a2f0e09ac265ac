"""The remote backend's request body, through the real ``openai`` client over an in-memory HTTP transport."""

import json
from types import SimpleNamespace

import httpx
import pytest
from openai import AsyncOpenAI

from sub250.llm.base import LLMRequest
from sub250.llm.openai_remote import OpenAIRemoteEngine

SSE = ('data: {"id":"c","object":"chat.completion.chunk","created":0,"model":"m","choices":[{"index":0,'
       '"delta":{"content":"{}"},"finish_reason":null}]}\n\n'
       'data: {"id":"c","object":"chat.completion.chunk","created":0,"model":"m","choices":[],'
       '"usage":{"prompt_tokens":5,"completion_tokens":1,"total_tokens":6}}\n\ndata: [DONE]\n\n')


def engine_with(bodies):
    def handle(request: httpx.Request) -> httpx.Response:
        bodies.append(json.loads(request.content))
        return httpx.Response(200, text=SSE, headers={"content-type": "text/event-stream"})

    engine = OpenAIRemoteEngine({"served_name": "m"}, SimpleNamespace(llm_base_url="http://remote/v1", llm_api_key="k"))
    engine.client = AsyncOpenAI(base_url="http://remote/v1", api_key="k",
                                http_client=httpx.AsyncClient(transport=httpx.MockTransport(handle)))
    engine.model = "m"
    return engine


@pytest.mark.asyncio(loop_scope="function")  # the openai client leaves tasks of its own on its loop
async def test_a_json_schema_goes_as_response_format_and_free_text_sends_none():
    bodies = []
    engine = engine_with(bodies)
    schema = {"type": "object", "properties": {"n": {"type": "string"}}}
    deltas = [d async for d in engine.stream(LLMRequest("r1", [{"role": "user", "content": "hi"}], json_schema=schema))]
    assert "".join(d.text for d in deltas) == "{}" and deltas[-1].finished
    assert bodies[0]["response_format"] == {"type": "json_schema", "json_schema": {"name": "output", "schema": schema}}
    [d async for d in engine.stream(LLMRequest("r2", [{"role": "user", "content": "hi"}]))]
    assert "response_format" not in bodies[1] and "repetition_penalty" not in bodies[1]
    await engine.close()
