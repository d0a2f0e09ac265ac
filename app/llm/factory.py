"""Pick the LLM backend a profile names (``[llm] backend``)."""

from __future__ import annotations

from typing import Any

from sub250.errors import ConfigError
from sub250.llm.base import LLMEngine


def create_engine(cfg: dict[str, Any], model: Any, settings: Any) -> LLMEngine:
    backend = cfg.get("backend", "vllm")
    if backend == "vllm":
        from sub250.llm.vllm_local import VLLMLocalEngine

        return VLLMLocalEngine(cfg, model, settings)
    if backend == "openai":
        from sub250.llm.openai_remote import OpenAIRemoteEngine

        return OpenAIRemoteEngine(cfg, settings)
    raise ConfigError(f"unknown LLM backend {backend!r}", "use backend = \"vllm\" or \"openai\" in the profile")
