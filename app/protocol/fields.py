"""Limits and field validators shared by client-event parsing and ``session.update``.

Every validator takes the client's value, the ``param`` to name in the error (``"response.instructions"``)
and the event's id, and returns the typed value or raises ``ProtocolError`` — nothing else: any JSON value,
of any type, gives one or the other. ``null`` on an optional field means "not given" (the callers skip it)
except where the API gives it a meaning (``turn_detection: null``, ``transcription: null``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sub250.protocol.errors import ProtocolError

# --- limits of what a client may send (each refusal is an `error` event; the session carries on) ------

#: Arrays/objects nested deeper than this are refused before parsing (``invalid_json``). API events nest
#: 6 levels at most (``response.create`` > ``response`` > ``input`` > item > ``content`` > part).
MAX_DEPTH = 32
#: Integers must be exact as a double: |n| <= 2**53 (16 digits at most; longer ones are refused before
#: conversion, so a 5000-digit number costs nothing).
MAX_INT = 2**53
MAX_INT_DIGITS = len(str(MAX_INT))
#: Client-chosen ids (``event_id``, ``item.id``, ``item_id``, ``response_id``, ``previous_item_id``).
MAX_ID_CHARS = 64
#: ``instructions`` (session or response) and the text of one conversation item, in UTF-8 bytes.
MAX_TEXT_BYTES = 32 * 1024
#: Content parts of one ``conversation.item.create`` item (and so the largest ``content_index`` + 1).
MAX_CONTENT_PARTS = 64
#: ``conversation.item.truncate``'s ``audio_end_ms``: one day.
MAX_AUDIO_END_MS = 86_400_000
#: ``max_output_tokens`` is 1..MAX_OUTPUT_TOKENS, or ``"inf"`` = MAX_OUTPUT_TOKENS.
MAX_OUTPUT_TOKENS = 4096
#: ``response.metadata`` (the API's rule): 16 pairs, keys <= 64 characters, values <= 512.
MAX_METADATA_PAIRS, MAX_METADATA_KEY_CHARS, MAX_METADATA_VALUE_CHARS = 16, 64, 512
#: A voice name (``audio.output.voice``), a model name, a transcription language.
MAX_NAME_CHARS = 64
MODALITIES = ("text", "audio")

Check = Callable[[Any, str, "str | None"], Any]


def show(value: Any) -> str:
    """A short, safe quote of a client value for an error message (never more than ~50 characters)."""
    if isinstance(value, str):
        return repr(value[:40]) + ("..." if len(value) > 40 else "")
    if value is None or isinstance(value, bool):
        return {None: "null", True: "true", False: "false"}[value]
    if isinstance(value, int):
        return str(value) if -10**15 < value < 10**15 else "a very large integer"
    if isinstance(value, float):
        return repr(value) if len(repr(value)) <= 24 else "a number"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    return "a value of an unknown type"


def invalid(param: str, message: str, event_id: str | None, code: str = "invalid_value") -> ProtocolError:
    return ProtocolError(code, message, param=param, event_id=event_id)


def _name(param: str) -> str:
    return param.rsplit(".", 1)[-1]


def string(value: Any, param: str, event_id: str | None, *, max_chars: int | None = None,
           max_bytes: int | None = None, min_chars: int = 0) -> str:
    """A str within the limits, encodable as UTF-8 (an unpaired ``\\ud800`` escape is refused: it would
    fail later, in the tokenizer or on the wire)."""
    if not isinstance(value, str):
        raise invalid(param, f"'{_name(param)}' must be a string, not {show(value)}", event_id)
    if len(value) < min_chars:
        raise invalid(param, f"'{_name(param)}' must not be empty", event_id)
    if max_chars is not None and len(value) > max_chars:
        raise invalid(param, f"'{_name(param)}' is {len(value)} characters; the limit is {max_chars}", event_id)
    size = utf8_len(value, param, event_id)
    if max_bytes is not None and size > max_bytes:
        raise invalid(param, f"'{_name(param)}' is {size} bytes (UTF-8); the limit is {max_bytes}", event_id)
    return value


def utf8_len(value: str, param: str, event_id: str | None) -> int:
    """``len(value.encode("utf-8"))``; an unpaired surrogate (``"\\ud800"`` in the JSON) is refused."""
    if value.isascii():
        return len(value)
    try:
        return len(value.encode("utf-8"))
    except UnicodeEncodeError:
        raise invalid(param, f"'{_name(param)}' is not valid Unicode text (it has an unpaired surrogate)",
                      event_id) from None


def identifier(value: Any, param: str, event_id: str | None) -> str:
    """A client-chosen id: a string of 1..MAX_ID_CHARS characters."""
    return string(value, param, event_id, min_chars=1, max_chars=MAX_ID_CHARS)


def name(value: Any, param: str, event_id: str | None) -> str:
    return string(value, param, event_id, min_chars=1, max_chars=MAX_NAME_CHARS)


def integer(value: Any, param: str, event_id: str | None, lo: int, hi: int) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not lo <= value <= hi:
        raise invalid(param, f"'{_name(param)}' must be an integer {lo}..{hi}, not {show(value)}", event_id)
    return value


def number(value: Any, param: str, event_id: str | None, lo: float, hi: float, *, open_range: bool = False) -> float:
    """An int or float in [lo, hi] (``open_range``: in (lo, hi)); NaN is never in range."""
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and (
        lo < value < hi if open_range else lo <= value <= hi)
    if not ok:
        bounds = f"between {lo} and {hi}" + (" (exclusive)" if open_range else "")
        raise invalid(param, f"'{_name(param)}' must be a number {bounds}, not {show(value)}", event_id)
    return float(value)


def boolean(value: Any, param: str, event_id: str | None) -> bool:
    if not isinstance(value, bool):
        raise invalid(param, f"'{_name(param)}' must be true or false, not {show(value)}", event_id)
    return value


def obj(value: Any, param: str, event_id: str | None) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise invalid(param, f"'{_name(param)}' must be an object, not {show(value)}", event_id)
    return value


def array(value: Any, param: str, event_id: str | None, *, of: Check | None = None) -> list[Any]:
    """A list; with ``of``, every element passes ``of`` (its param: ``param[i]``)."""
    if not isinstance(value, list):
        raise invalid(param, f"'{_name(param)}' must be an array, not {show(value)}", event_id)
    if of is not None:
        for i, v in enumerate(value):
            of(v, f"{param}[{i}]", event_id)
    return value


def string_or_object(value: Any, param: str, event_id: str | None) -> Any:
    if not isinstance(value, (str, dict)):
        raise invalid(param, f"'{_name(param)}' must be a string or an object, not {show(value)}", event_id)
    return value


def any_string(value: Any, param: str, event_id: str | None) -> str:
    return string(value, param, event_id, max_bytes=MAX_TEXT_BYTES)


# --- the fields ``session`` (session.update) and ``response`` (response.create) share ------------------

def instructions(value: Any, param: str, event_id: str | None) -> str:
    return string(value, param, event_id, max_bytes=MAX_TEXT_BYTES)


def output_modalities(value: Any, param: str, event_id: str | None) -> tuple[str, ...]:
    """A non-empty array of ``"text"``/``"audio"`` (repeats dropped): ``["audio"]`` (audio and its
    transcript) or ``["text"]``."""
    if not isinstance(value, list) or not value or not all(isinstance(m, str) and m in MODALITIES for m in value):
        raise invalid(param, "'output_modalities' must be [\"audio\"] or [\"text\"]", event_id)
    return tuple(dict.fromkeys(value))


def max_output_tokens(value: Any, param: str, event_id: str | None) -> int:
    """1..MAX_OUTPUT_TOKENS, or ``"inf"`` (the API's "as many as the model allows") = MAX_OUTPUT_TOKENS."""
    if value == "inf":
        return MAX_OUTPUT_TOKENS
    if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= MAX_OUTPUT_TOKENS:
        raise invalid(param, f"'max_output_tokens' must be an integer 1..{MAX_OUTPUT_TOKENS} or \"inf\", "
                             f"not {show(value)}", event_id)
    return value


#: Validated and used.
_COMMON: dict[str, Check] = {
    "instructions": instructions,
    "output_modalities": output_modalities,
    "max_output_tokens": max_output_tokens,
}
#: GA fields we accept and ignore, after a type check (``tools``/``tool_choice``: app/protocol/tools.py).
_COMMON_IGNORED: dict[str, Check] = {
    "prompt": obj,
    "reasoning": obj,
    "parallel_tool_calls": boolean,
}


def common_options(src: dict[str, Any], prefix: str, event_id: str | None) -> dict[str, Any]:
    """Validate the fields ``session.update``'s ``session`` and ``response.create``'s ``response`` share.

    Returns ``{"instructions": str, "output_modalities": tuple, "max_output_tokens": int}`` with only the
    keys the client gave (not null); type-checks and drops ``prompt``, ``reasoning``, ``parallel_tool_calls``.
    ``prefix``: ``"session."`` or ``"response."``. (``tools``/``tool_choice``: ``app.protocol.tools.options``.)
    """
    checked(src, prefix, event_id, _COMMON_IGNORED)
    return checked(src, prefix, event_id, _COMMON)


def checked(src: dict[str, Any], prefix: str, event_id: str | None, checks: dict[str, Check]) -> dict[str, Any]:
    """``{key: check(src[key])}`` for the keys of ``checks`` present in ``src`` and not null."""
    return {key: check(src[key], prefix + key, event_id)
            for key, check in checks.items() if src.get(key) is not None}
