"""The tools written out for the model, and the JSON schemas its output must follow.

Small models' chat templates know no tool role, so the tools are described in the system message as plain
lines, and the engine's structured outputs (vLLM guided decoding) make the output valid JSON of the right
shape: ``{"name": <tool>, "arguments": {...}}`` with the tool's own ``parameters`` schema for the arguments.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from sub250.protocol.tools import FunctionTool

NO_TOOL = "none"


def signature(tool: FunctionTool) -> str:
    """``lookup_order(order_number: string)``: the tool's name and its parameters with their types."""
    props = tool.parameters.get("properties") or {}
    args = ", ".join(f"{name}: {spec.get('type', 'value')}" if isinstance(spec, dict) else name
                     for name, spec in props.items())
    return f"{tool.name}({args})"


def describe(tools: Sequence[FunctionTool], *, may_decline: bool) -> str:
    """The system message of a tool decision."""
    lines = ["You decide whether the caller's request needs one of these tools, and with which arguments:"]
    lines += [f"- {signature(t)}: {t.description}" if t.description else f"- {signature(t)}" for t in tools]
    shape = '{"name": <tool>, "arguments": {...}}'
    if may_decline:
        lines.append(f'Reply with JSON only: {shape}, or {{"name": "{NO_TOOL}"}} when no tool is needed.')
    else:
        lines.append(f"Reply with JSON only: {shape}.")
    return "\n".join(lines)


def describe_arguments(tool: FunctionTool) -> str:
    """The system message when the tool is already chosen: only its arguments are asked for."""
    about = f": {tool.description}" if tool.description else ""
    return (f"The caller's request is handled by the tool {signature(tool)}{about}\n"
            "Reply with the tool's arguments as a JSON object, taken from the caller's words.")


def call_schema(tools: Sequence[FunctionTool], *, may_decline: bool) -> dict[str, Any]:
    """One of the tools with valid arguments, or (``may_decline``) ``{"name": "none"}``."""
    options: list[dict[str, Any]] = [
        {"type": "object", "properties": {"name": {"const": t.name}, "arguments": t.parameters},
         "required": ["name", "arguments"], "additionalProperties": False} for t in tools]
    if may_decline:
        options.append({"type": "object", "properties": {"name": {"const": NO_TOOL}}, "required": ["name"],
                        "additionalProperties": False})
    return options[0] if len(options) == 1 else {"anyOf": options}


def messages(system: str, question: str) -> list[dict[str, str]]:
    return [{"role": "system", "content": system}, {"role": "user", "content": question}]


def compact(value: Any) -> str:
    """The arguments as the wire carries them: compact JSON text."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)
