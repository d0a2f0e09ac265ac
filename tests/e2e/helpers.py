"""Shared by the end-to-end tests."""

from scripts.bench.sounds import hum  # noqa: F401  (a wordless sound over the reply)

#: A persona of the client's own.
GENERATIVE_INSTRUCTIONS = ("You are the voice support agent of Halden Labs. Answer the caller's question from the "
                           "facts in the context.")
#: ``session`` fields that get the LLM's free answer (grounding turned off explicitly: no gate, no extract), for
#: tests that need a long, streamed, generated reply; instructions alone keep the profile's grounded answer.
LLM_ANSWERS = {"instructions": GENERATIVE_INSTRUCTIONS, "sub250": {"grounding": False}}

