"""Function tools of the GA API, typed: ``session.tools`` / ``tool_choice`` (also per ``response.create``).

A tool is ``{"type": "function", "name", "description", "parameters"}``; ``parameters`` is a JSON schema of an
object (checked as a schema by ``jsonschema``, so an argument can be validated against it later).
``tool_choice`` is ``"auto"`` (the default), ``"none"``, ``"required"``, or ``{"type": "function", "name": N}``
(that tool, always). Anything else is a ``ProtocolError`` naming the field, like every other field here.
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass
from typing import Any

import jsonschema

from sub250.protocol import fields as f

#: Tools per session (the API allows 128).
MAX_TOOLS = 128
#: One tool's ``parameters`` schema, serialized (UTF-8 bytes).
MAX_SCHEMA_BYTES = 16 * 1024
#: A tool's description.
MAX_DESCRIPTION_CHARS = 1024
#: ``function_call_output.output`` and ``function_call.arguments`` (UTF-8 bytes).
MAX_OUTPUT_BYTES = f.MAX_TEXT_BYTES
_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
CHOICES = ("auto", "none", "required")
#: A tool without ``parameters`` takes none.
NO_PARAMETERS: dict[str, Any] = {"type": "object", "properties": {}}


@dataclass(frozen=True)
class FunctionTool:
    name: str
    description: str = ""
    #: A JSON schema of an object (validated as a schema); frozen as its JSON text so the tool is hashable.
    parameters_json: str = json.dumps(NO_PARAMETERS, separators=(",", ":"))

    @property
    def parameters(self) -> dict[str, Any]:
        return json.loads(self.parameters_json)

    @functools.cached_property
    def validator(self) -> Any:
        """A validator of arguments against ``parameters``, built once (the schema was checked when parsed)."""
        schema = self.parameters
        return jsonschema.validators.validator_for(schema)(schema)

    def to_wire(self) -> dict[str, Any]:
        return {"type": "function", "name": self.name, "description": self.description,
                "parameters": self.parameters}


@dataclass(frozen=True)
class ToolChoice:
    """``mode``: auto | none | required | function (then ``name`` is the tool to call)."""

    mode: str = "auto"
    name: str | None = None

    def to_wire(self) -> str | dict[str, str]:
        return {"type": "function", "name": self.name or ""} if self.mode == "function" else self.mode


AUTO = ToolChoice()


def tool_name(value: Any, param: str, event_id: str | None) -> str:
    if not isinstance(value, str) or not _NAME.match(value):
        raise f.invalid(param, f"'name' must be 1..64 letters, digits, '_' or '-', not {f.show(value)}", event_id)
    return value


def function_tool(value: Any, param: str, event_id: str | None) -> FunctionTool:
    tool = f.obj(value, param, event_id)
    kind = tool.get("type")
    if kind is not None and kind != "function":
        raise f.invalid(f"{param}.type", f"only 'function' tools are supported, not {f.show(kind)}", event_id)
    name = tool_name(tool.get("name"), f"{param}.name", event_id)
    description = tool.get("description")
    description = "" if description is None else f.string(description, f"{param}.description", event_id,
                                                           max_chars=MAX_DESCRIPTION_CHARS)
    schema = tool.get("parameters")
    if schema is None:
        schema = NO_PARAMETERS
    f.obj(schema, f"{param}.parameters", event_id)
    if schema.get("type", "object") != "object":
        raise f.invalid(f"{param}.parameters.type", "a tool's parameters must be a JSON schema of type 'object'",
                        event_id)
    try:
        jsonschema.validators.validator_for(schema).check_schema(schema)
    except jsonschema.SchemaError as exc:
        where = "/".join(str(p) for p in exc.path) or "(top)"
        raise f.invalid(f"{param}.parameters", f"'parameters' is not a valid JSON schema (at {where}: "
                                               f"{exc.message[:120]})", event_id) from None
    text = json.dumps(schema, separators=(",", ":"), ensure_ascii=False)
    if len(text.encode()) > MAX_SCHEMA_BYTES:
        raise f.invalid(f"{param}.parameters", f"'parameters' is over {MAX_SCHEMA_BYTES} bytes", event_id)
    return FunctionTool(name, description, text)


def tools(value: Any, param: str, event_id: str | None) -> tuple[FunctionTool, ...]:
    """An array of function tools with distinct names."""
    items = f.array(value, param, event_id)
    if len(items) > MAX_TOOLS:
        raise f.invalid(param, f"'tools' has {len(items)} tools; the limit is {MAX_TOOLS}", event_id)
    out = tuple(function_tool(t, f"{param}[{i}]", event_id) for i, t in enumerate(items))
    names = [t.name for t in out]
    if len(set(names)) != len(names):
        dup = next(n for n in names if names.count(n) > 1)
        raise f.invalid(param, f"two tools are named {dup!r}", event_id)
    return out


def tool_choice(value: Any, param: str, event_id: str | None) -> ToolChoice:
    if isinstance(value, str):
        if value not in CHOICES:
            raise f.invalid(param, f"'tool_choice' must be auto, none, required or a function, not "
                                   f"{f.show(value)}", event_id)
        return ToolChoice(value)
    choice = f.obj(value, param, event_id)
    if choice.get("type") != "function":
        raise f.invalid(f"{param}.type", "'tool_choice' objects must be {\"type\": \"function\", \"name\": ...}",
                        event_id)
    return ToolChoice("function", tool_name(choice.get("name"), f"{param}.name", event_id))


def output_text(value: Any, param: str, event_id: str | None) -> str:
    """A function call's ``output`` or ``arguments``: a string of at most MAX_OUTPUT_BYTES (UTF-8)."""
    return f.string(value, param, event_id, max_bytes=MAX_OUTPUT_BYTES)


def check_choice(choice: ToolChoice, available: tuple[FunctionTool, ...], param: str, event_id: str | None) -> None:
    """A forced function must be one of the tools."""
    if choice.mode == "function" and choice.name not in {t.name for t in available}:
        raise f.invalid(param, f"'tool_choice' names {choice.name!r}, which is not among the tools", event_id)


#: The tool fields ``session`` and ``response`` share.
FIELDS: dict[str, f.Check] = {"tools": tools, "tool_choice": tool_choice}


def options(src: dict[str, Any], prefix: str, event_id: str | None) -> dict[str, Any]:
    """``{"tools": (...), "tool_choice": ToolChoice}`` with the keys given (not null)."""
    return f.checked(src, prefix, event_id, FIELDS)
