"""A tool's output said aloud, for profiles whose model does not phrase answers itself (``extractive``).

The output is the client's string: prose is said as it is; a JSON object becomes one short sentence per
field ("Status: shipped."), nested values flattened, so every fact the tool returned is said and nothing is
added. Long outputs are cut at ``max_words`` (the speaker splits them into chunks anyway).
"""

from __future__ import annotations

import json
from typing import Any

MAX_WORDS = 80


def _label(key: str) -> str:
    words = key.replace("_", " ").replace("-", " ").strip()
    return words[:1].upper() + words[1:]


def _value(value: Any) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if value is None:
        return "none"
    if isinstance(value, dict):
        return ", ".join(f"{_label(k).lower()} {_value(v)}" for k, v in value.items())
    if isinstance(value, list):
        return ", ".join(_value(v) for v in value)
    return str(value).strip()


def _sentence(text: str) -> str:
    text = text.strip()
    return text if not text or text[-1] in ".!?" else text + "."


def speakable(output: str, *, max_words: int = MAX_WORDS) -> str:
    """What to say for a tool's ``output``."""
    try:
        data = json.loads(output)
    except ValueError:
        data = output
    if isinstance(data, dict):
        text = " ".join(_sentence(f"{_label(k)}: {_value(v)}") for k, v in data.items())
    elif isinstance(data, list):
        text = _sentence(_value(data))
    else:
        text = _sentence(_value(data))
    words = text.split()
    return " ".join(words[:max_words]) + (" …" if len(words) > max_words else "")
