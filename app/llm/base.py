"""The engine interface every LLM backend implements."""

from __future__ import annotations

import abc
import asyncio
import logging
from collections.abc import AsyncGenerator
from dataclasses import dataclass, field
from typing import Any

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class LLMRequest:
    request_id: str
    messages: list[dict[str, str]]
    max_tokens: int = 96
    temperature: float = 0.0
    #: Token ids of the prompt, when the caller already tokenized it (see ``LLMEngine.tokenize``).
    prompt_token_ids: list[int] | None = None
    #: Sampling penalties against loops (vLLM's ``repetition_penalty``: 1.0 is off; OpenAI's
    #: ``frequency_penalty``: 0.0 is off).
    repetition_penalty: float = 1.0
    frequency_penalty: float = 0.0
    #: A JSON schema the output must follow (the engine's structured outputs / guided decoding): the reply is
    #: then one JSON value valid for it. None: free text.
    json_schema: dict[str, Any] | None = None
    #: The texts the output must be one of (structured outputs' choice grammar). None: free text.
    choice: tuple[str, ...] | None = None


@dataclass
class TokenDelta:
    """One step of a streamed reply: new text, and running counters."""

    text: str
    #: Tokens generated so far for this request (cumulative).
    num_tokens: int
    finished: bool = False
    finish_reason: str | None = None
    #: Prompt tokens, and how many of them came from the prefix cache (when the engine says).
    prompt_tokens: int | None = None
    cached_prompt_tokens: int | None = None
    #: Speculative-decoding acceptance of this request (on the final delta, when the engine reports it):
    #: ``num_draft_tokens``, ``num_accepted_draft_tokens``, ``draft_acceptance_rate``, ``mean_acceptance_length``.
    spec_decoding: dict[str, Any] | None = None
    extra: dict[str, Any] = field(default_factory=dict)


class LLMEngine(abc.ABC):
    """A streaming text generator shared by all sessions (the engine batches concurrent requests)."""

    name: str = "llm"
    #: Why the engine is dead for good (``None`` while it works); set once, by :meth:`mark_failed`.
    failure: BaseException | None = None
    _failed: asyncio.Event | None = None

    @property
    def failed(self) -> asyncio.Event:
        """Set once the engine has found itself dead for good: it can serve no request any more (an in-process
        engine whose core process died). The server then turns ``failed`` and exits for its supervisor to
        restart it (``app/cli.py``). A remote backend never sets it: its own server is restarted apart."""
        if self._failed is None:
            self._failed = asyncio.Event()
        return self._failed

    def mark_failed(self, reason: BaseException) -> None:
        """The engine is dead: record why and set :attr:`failed` (once; later calls change nothing)."""
        if self.failure is not None:
            return
        self.failure = reason
        log.error("the %s engine is dead: %s", self.name, reason)
        self.failed.set()

    @abc.abstractmethod
    async def start(self) -> None:
        """Load the model; raise ``ModelError``/``EngineError`` naming the problem."""

    @abc.abstractmethod
    def tokenize(self, messages: list[dict[str, str]]) -> list[int]:
        """Apply the chat template and tokenize (CPU-bound but short: ~1 ms for a few hundred tokens)."""

    def count_tokens(self, text: str) -> int:
        """Tokens in ``text`` (for history trimming); engines with a local tokenizer count exactly."""
        return len(text) // 4 + 1

    @abc.abstractmethod
    def stream(self, request: LLMRequest) -> AsyncGenerator[TokenDelta, None]:
        """Stream the reply. Closing the iterator early aborts the request in the engine."""

    async def turn_end_logprob(self, text: str, request_id: str) -> float | None:
        """How likely the caller's turn ends after ``text`` (their words so far, without final punctuation), by
        the model's own reading of a conversation: the log-probability that the next token ends the sentence
        ("?", ".", "!") or closes the user's message (the idea of LiveKit's turn detector, on the served model as
        it is). None: this engine cannot say (the session then decides on silence alone)."""
        return None

    @abc.abstractmethod
    async def abort(self, request_id: str) -> None:
        """Stop a running request now (barge-in)."""

    @abc.abstractmethod
    async def close(self) -> None: ...

    def describe(self) -> dict[str, Any]:
        return {"engine": self.name}
