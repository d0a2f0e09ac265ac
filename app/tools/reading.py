"""An argument the question holds as it is: read, not written by the model.

A tool chosen for the question (forced by ``tool_choice``, or picked by the embedding selector) with one parameter - a string with a ``pattern``, such
as an order number's ``^[0-9]{4,8}$`` - whose question holds exactly one stretch of text matching that pattern
(on word boundaries) gets that text as its argument, with no generation: "Keyed in: 48213" (a phone's keys,
app/telephony/keypad.py) calls ``lookup_order`` with ``"48213"`` at once. The model took 1.6-3.5 s to write the
same 18 tokens on a 2-core CPU (journal §48). Anything else - more parameters, no pattern, no match or several
different ones, a pattern Python's ``re`` does not read - is left to the model.
"""

from __future__ import annotations

import re
from typing import Any

from sub250.protocol.tools import FunctionTool

#: Characters that cannot touch a match (it would be part of a longer word or number).
_EDGE = "0-9A-Za-z_"


def read_arguments(tool: FunctionTool, question: str) -> dict[str, Any] | None:
    """``{parameter: the text}`` when the question holds the tool's one argument verbatim (see the module); None
    otherwise."""
    props = tool.parameters.get("properties") or {}
    if len(props) != 1:
        return None
    (name, spec), = props.items()
    pattern = spec.get("pattern") if isinstance(spec, dict) and spec.get("type") == "string" else None
    if not isinstance(pattern, str):
        return None
    core = pattern.removeprefix("^").removesuffix("$")
    try:
        found = {m.group(1) for m in re.finditer(rf"(?<![{_EDGE}])({core})(?![{_EDGE}])", question)}
    except re.error:
        return None
    if len(found) != 1:
        return None
    arguments = {name: found.pop()}
    return arguments if tool.validator.is_valid(arguments) else None
