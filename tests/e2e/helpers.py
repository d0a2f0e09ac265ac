"""Shared by the end-to-end tests."""

from app.bench.sounds import hum  # noqa: F401  (a wordless sound over the reply)

#: Instructions of the client's own: the session then answers with the LLM (the default profile's extractive
#: mode applies to the default instructions only), for tests that need a long, streamed, generated reply.
GENERATIVE_INSTRUCTIONS = ("You are the voice support agent of Halden Labs. Answer the caller's question from the "
                           "facts in the context.")

