"""What a reply is made with: :class:`ReplyOptions` (what it does) and :class:`ReplyContext` (what it works with).

The session resolves the options per response (its configuration with a ``response.create``'s overrides) and
builds the context from its own parts; a :class:`~sub250.session.reply.Reply` takes both and an output.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sub250.protocol import tools as t
from sub250.protocol.session_config import SessionConfig
from sub250.session.conversation import Conversation
from sub250.session.engines import Engines
from sub250.session.stats import SessionStats
from sub250.session.tuning import PipelineTuning


@dataclass(frozen=True)
class ReplyOptions:
    """What this reply does, resolved from the session's configuration and a ``response.create``'s overrides."""

    instructions: str
    modalities: tuple[str, ...]
    max_tokens: int
    tools: tuple[t.FunctionTool, ...] = ()
    tool_choice: t.ToolChoice = t.AUTO
    #: The session's transcription prompt for the caller's words this reply transcribes (None: the profile's).
    transcription_prompt: str | None = None
    #: ``response.create``'s ``metadata``, echoed on the response object (clients match their request by it).
    metadata: dict[str, str] | None = None
    #: ``session.sub250.grounding``: False, the client turned the gate and the extract off (the LLM answers freely).
    grounding: bool = True

    @property
    def audio(self) -> bool:
        return "audio" in self.modalities

    @property
    def may_call_tools(self) -> bool:
        return bool(self.tools) and self.tool_choice.mode != "none"

    @classmethod
    def resolve(cls, config: SessionConfig, overrides: Any = None) -> ReplyOptions:
        """The session's settings with a ``response.create``'s overrides (already validated) applied; a
        ``tool_choice`` naming a function that is not among the resulting tools is refused (ProtocolError)."""
        tools = config.tools if overrides is None or overrides.tools is None else overrides.tools
        choice = (overrides and overrides.tool_choice) or config.tool_choice
        t.check_choice(choice, tools, "response.tool_choice", None)
        return cls(instructions=(overrides and overrides.instructions) or config.instructions,
                   modalities=(overrides and overrides.output_modalities) or config.output_modalities,
                   max_tokens=(overrides and overrides.max_output_tokens) or config.max_output_tokens,
                   tools=tools, tool_choice=choice, transcription_prompt=config.transcription_prompt,
                   metadata=overrides.metadata if overrides is not None else None, grounding=config.grounding)


@dataclass(frozen=True)
class ReplyContext:
    """The session's parts a reply works with: the engines (``stack``), the tuning, the conversation it joins,
    the session's counters, and the id its response objects name (``conversation_id``)."""

    stack: Engines
    tuning: PipelineTuning
    conversation: Conversation
    stats: SessionStats
    conversation_id: str
