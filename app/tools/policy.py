"""What a profile chooses about tool calls (``[tools]``), read once into typed fields with documented defaults."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sub250.errors import ConfigError

SELECTORS = ("llm", "embedding")


@dataclass(frozen=True)
class ToolPolicy:
    #: Who picks the tool. ``llm``: the model writes ``{"name": ..., "arguments": {...}}`` (or ``{"name":
    #: "none"}``) under a JSON schema of every tool (structured outputs), in one generation. ``embedding``:
    #: the question's vector (retrieval's) against each tool's name and description picks the tool, at least
    #: ``min_score`` apart from "no tool"; the model then writes only that tool's arguments, under its schema.
    #: For models too small to choose (measured: docs/BENCHMARKS.md §18).
    selector: str = "llm"
    #: ``embedding``: the cosine a tool's text needs to be called (``tool_choice: "auto"``) ...
    min_score: float = 0.5
    #: ... and the tools compete with the knowledge base: a tool is called only when its cosine is at most this
    #: much below the best retrieved passage's (a question the KB answers well is not a tool's). None: off.
    kb_margin: float | None = None
    #: Tokens the model may spend on one call's JSON.
    max_tokens: int = 128
    #: A chosen tool's one pattern-bound argument that the question holds as it is (an order number) is read from
    #: it, not written by the model (app/tools/reading.py). False: the model writes every argument.
    read_arguments: bool = True

    def __post_init__(self) -> None:
        if self.selector not in SELECTORS:
            raise ConfigError(f"[tools] selector = {self.selector!r} is not one of {', '.join(SELECTORS)}",
                              "fix the profile's [tools] section")
        if not 0.0 <= self.min_score <= 1.0 or self.max_tokens < 8 or not (
                self.kb_margin is None or -1.0 <= self.kb_margin <= 1.0):
            raise ConfigError("[tools] min_score is a cosine between 0 and 1, kb_margin one between -1 and 1, "
                              "max_tokens at least 8", "fix the profile's [tools] section")

    @classmethod
    def from_stage(cls, cfg: dict[str, Any]) -> ToolPolicy:
        d = cls()
        return cls(selector=str(cfg.get("selector", d.selector)),
                   min_score=float(cfg.get("min_score", d.min_score)),
                   kb_margin=None if cfg.get("kb_margin") is None else float(cfg["kb_margin"]),
                   max_tokens=int(cfg.get("max_tokens", d.max_tokens)),
                   read_arguments=bool(cfg.get("read_arguments", d.read_arguments)))
