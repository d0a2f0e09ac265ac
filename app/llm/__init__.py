"""The LLM stage: an engine interface, vLLM in-process (``vllm_local``), a remote OpenAI-compatible
vLLM server (``openai_remote``), and the prompt template (``prompt``)."""

from app.llm.base import LLMEngine, LLMRequest, TokenDelta
from app.llm.factory import create_engine

__all__ = ["LLMEngine", "LLMRequest", "TokenDelta", "create_engine"]
