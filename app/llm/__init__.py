"""The LLM stage: an engine interface, vLLM in-process (``vllm_local``), a remote OpenAI-compatible
vLLM server (``openai_remote``), and the prompt template (``prompt``)."""

from sub250.llm.base import LLMEngine, LLMRequest, TokenDelta
from sub250.llm.factory import create_engine

__all__ = ["LLMEngine", "LLMRequest", "TokenDelta", "create_engine"]
