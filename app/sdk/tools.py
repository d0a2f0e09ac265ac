"""Client tools: Python functions the model may call, run by the SDK when a response asks for them.

Register a function with :meth:`ToolSet.tool` (or ``RealtimeClient.tool``)::

    @client.tool
    async def lookup_order(order_number: str) -> dict:
        '''Look up where an order is: its status and delivery date.'''
        ...

Its ``parameters`` schema comes from the signature (pydantic: the standard for typed arguments), its
description from the docstring. When a ``response.done`` carries ``function_call`` items, :meth:`ToolSet.answer`
runs each call - arguments validated against the signature, at most ``timeout_s`` seconds - and returns the
``conversation.item.create`` events of their ``function_call_output``\\ s: the function's result as JSON, or, when
it raised, timed out or got bad arguments, ``{"error": "..."}`` - the model is told, and the turn goes on.
Transport-agnostic: the WebSocket client sends the events itself; a WebRTC client sends them on its data channel.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

log = logging.getLogger(__name__)

#: Seconds a tool may run before its call is answered with a timeout error.
DEFAULT_TIMEOUT_S = 10.0
#: A tool's output is cut to this many characters (the server takes 32 KiB).
MAX_OUTPUT_CHARS = 16_000


@dataclass
class Tool:
    name: str
    description: str
    parameters: dict[str, Any]
    handler: Callable[..., Any]
    timeout_s: float = DEFAULT_TIMEOUT_S
    #: The pydantic model of the arguments (validation), built from the signature.
    model: Any = None

    def definition(self) -> dict[str, Any]:
        """The GA ``session.tools`` entry."""
        return {"type": "function", "name": self.name, "description": self.description,
                "parameters": self.parameters}


@dataclass
class ToolRun:
    """One call the SDK answered: what the model asked, what the tool gave, and how long it took."""

    call_id: str
    name: str
    arguments: str
    output: str
    ok: bool
    ms: float
    error: str | None = None


def _schema(model: Any) -> dict[str, Any]:
    """pydantic's JSON schema of the arguments, without its cosmetic ``title``\\ s."""
    def clean(node: Any) -> Any:
        if isinstance(node, dict):
            return {k: clean(v) for k, v in node.items() if k != "title" or not isinstance(v, str)}
        if isinstance(node, list):
            return [clean(v) for v in node]
        return node

    schema = clean(model.model_json_schema())
    schema.setdefault("properties", {})
    return schema


def tool_from_function(fn: Callable[..., Any], *, name: str | None = None, description: str | None = None,
                       timeout_s: float = DEFAULT_TIMEOUT_S) -> Tool:
    """A :class:`Tool` from a (sync or async) function: its parameters and their annotations and defaults."""
    from pydantic import ConfigDict, create_model

    fields: dict[str, Any] = {}
    for p in inspect.signature(fn, eval_str=True).parameters.values():  # "from __future__ import annotations"
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            raise TypeError(f"tool {fn.__name__}: *args/**kwargs cannot be described to the model")
        annotation = Any if p.annotation is inspect.Parameter.empty else p.annotation
        fields[p.name] = (annotation, ... if p.default is inspect.Parameter.empty else p.default)
    model = create_model(f"{fn.__name__}_arguments", __config__=ConfigDict(extra="forbid"), **fields)
    doc = inspect.getdoc(fn) or ""
    return Tool(name or fn.__name__, description if description is not None else doc.split("\n\n")[0].strip(),
                _schema(model), fn, timeout_s, model)


@dataclass
class ToolSet:
    tools: dict[str, Tool] = field(default_factory=dict)
    #: On a phone call, the tool what the caller keys in calls (``keypad=True``; ``session.sub250.keypad_tool``).
    keypad: str = ""

    def __bool__(self) -> bool:
        return bool(self.tools)

    def tool(self, fn: Callable[..., Any] | None = None, *, name: str | None = None,
             description: str | None = None, timeout_s: float = DEFAULT_TIMEOUT_S, keypad: bool = False) -> Any:
        """Register ``fn`` (usable bare, ``@tool``, or with options, ``@tool(timeout_s=3)``). ``keypad``: on a phone
        call, what the caller keys in (an order number, then ``#``) calls this tool, its arguments written from
        the digits."""
        def register(f: Callable[..., Any]) -> Callable[..., Any]:
            t = tool_from_function(f, name=name, description=description, timeout_s=timeout_s)
            self.tools[t.name] = t
            if keypad:
                self.keypad = t.name
            return f

        return register(fn) if fn is not None else register

    def definitions(self) -> list[dict[str, Any]]:
        return [t.definition() for t in self.tools.values()]

    @staticmethod
    def calls(response_done: dict[str, Any]) -> list[dict[str, Any]]:
        """The ``function_call`` items of a ``response.done`` event's response (completed ones)."""
        response = response_done.get("response") or {}
        return [item for item in response.get("output") or []
                if item.get("type") == "function_call" and item.get("status", "completed") == "completed"]

    async def run(self, call: dict[str, Any]) -> ToolRun:
        """Run one ``function_call`` item; never raises (the error becomes the output)."""
        t0 = time.perf_counter()
        name, call_id, raw = call.get("name", ""), call.get("call_id", ""), call.get("arguments") or "{}"
        tool = self.tools.get(name)
        error: str | None = None
        result: Any = None
        try:
            if tool is None:
                raise LookupError(f"no tool named {name!r} in this client")
            args = tool.model.model_validate_json(raw)
            kwargs = {k: getattr(args, k) for k in type(args).model_fields}
            if inspect.iscoroutinefunction(tool.handler):
                result = await asyncio.wait_for(tool.handler(**kwargs), tool.timeout_s)
            else:
                result = await asyncio.wait_for(asyncio.to_thread(tool.handler, **kwargs), tool.timeout_s)
        except TimeoutError:
            error = f"{name} did not answer within {tool.timeout_s if tool else 0:g} s"
        except Exception as exc:  # told to the model as the call's result: the turn goes on
            error = f"{name} failed: {type(exc).__name__}: {str(exc)[:300]}"
            log.warning("tool %s failed", name, exc_info=True)
        if error is None:
            output = result if isinstance(result, str) else json.dumps(result, default=str, ensure_ascii=False)
        else:
            output = json.dumps({"error": error})
        return ToolRun(call_id, name, raw, output[:MAX_OUTPUT_CHARS], error is None,
                       (time.perf_counter() - t0) * 1000, error)

    async def answer(self, response_done: dict[str, Any]) -> tuple[list[ToolRun], list[dict[str, Any]]]:
        """Run every call of a ``response.done`` (concurrently); return the runs and the events to send: one
        ``conversation.item.create`` per output, then ``response.create`` (none when there was no call)."""
        calls = self.calls(response_done)
        if not calls:
            return [], []
        runs = list(await asyncio.gather(*(self.run(c) for c in calls)))
        events: list[dict[str, Any]] = [
            {"type": "conversation.item.create",
             "item": {"type": "function_call_output", "call_id": r.call_id, "output": r.output}} for r in runs]
        events.append({"type": "response.create"})
        return runs, events
