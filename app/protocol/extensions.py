"""The ``sub250.*`` events a client asks for (``session.include``), and nothing it did not ask for.

Standard clients (the official ``openai`` package, the OpenAI Agents SDK, Pipecat, LiveKit Agents) parse every
event they receive and report an unknown type as an error, so a session sends only the GA API's events unless
the client names our additions in ``session.include`` - the GA field that asks for optional output - beside
the values the GA API defines there. Sans-I/O: the session's transport asks :func:`wanted` for each event.
"""

from __future__ import annotations

from typing import Any

from sub250.protocol import fields as f

#: ``session.include`` names of our additions, and the event types each one lets through.
EXTENSIONS: dict[str, tuple[str, ...]] = {
    #: the turn's latency report against the budget (docs/LATENCY.md), during the turn and at its end
    "sub250.latency": ("sub250.turn.latency",),
    #: the passages a reply was grounded in
    "sub250.sources": ("sub250.sources",),
    #: the transcript so far, while the caller speaks
    "sub250.partials": ("sub250.transcript.partial",),
    #: a reply paused while sound over it is checked for words, and resumed when it had none
    "sub250.pauses": ("sub250.reply.paused", "sub250.reply.resumed"),
}
#: Every addition: what our own clients (app.sdk, web/sub250.js, the benchmarks) ask for.
ALL = tuple(EXTENSIONS)
#: Values the GA API defines for ``include``: accepted; the server has nothing more to add for them (the
#: transcript's log-probabilities are not computed).
GA_INCLUDES = ("item.input_audio_transcription.logprobs",)

_EVENT_EXTENSION = {etype: name for name, types in EXTENSIONS.items() for etype in types}


def include(value: Any, param: str, event_id: str | None) -> tuple[str, ...]:
    """``session.include``: an array of the names above (repeats dropped, order kept); any other value is an
    ``invalid_value`` error naming the entry and what is accepted."""
    names = f.array(value, param, event_id, of=f.name)
    for i, name in enumerate(names):
        if name not in EXTENSIONS and name not in GA_INCLUDES:
            raise f.invalid(f"{param}[{i}]", f"{f.show(name)} cannot be included; accepted: "
                                             f"{', '.join(repr(n) for n in (*GA_INCLUDES, *ALL))}",
                            event_id)
    return tuple(dict.fromkeys(names))


def wanted(event_type: str, included: tuple[str, ...]) -> bool:
    """Whether an event of this type goes to a client whose session includes ``included``: every event but
    our additions, and those only when asked for."""
    name = _EVENT_EXTENSION.get(event_type)
    if name is None:
        return not event_type.startswith("sub250.")  # an addition no name covers is never sent
    return name in included
