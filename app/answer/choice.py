"""The ``choice`` mode: the LLM answers with one of the grounded candidates - the best extract of each retrieved
passage, best first - or the decline, under the engine's structured outputs (a choice grammar: its tokens can
spell nothing else). The model decides; the candidates keep the facts the knowledge base's (a 135M model asked
to phrase an answer loses them: docs/BENCHMARKS.md §40).

Sans-I/O: :func:`candidates` makes the list, :func:`prompt_hint` tells the model what it chooses from, and
:class:`ChoiceReader` follows the model's tokens: once they are the start of one candidate only, the choice is
made and the rest of its text is known (the stream is stopped there: the grammar would only copy it out).
"""

from __future__ import annotations

from collections.abc import Sequence

#: Said after the question: what the model answers with (the system prompt stays byte-stable for the prefix
#: cache); ``{decline}`` is the decline's text.
CHOICE_HINT = "Reply with the one context line that answers the question, word for word, without its title."


def candidates(extracts: Sequence[str], decline: str | None) -> tuple[str, ...]:
    """The texts the model may answer with: ``extracts`` (best first, repeats and empties dropped), then the
    decline (None: not a candidate; the gates alone decline)."""
    seen = dict.fromkeys(e.strip() for e in extracts if e.strip())
    if decline is None:
        return tuple(seen)
    seen.pop(decline, None)
    return (*seen, decline)


def prompt_hint(hint: str, decline: str) -> str:
    return hint.replace("{decline}", decline)


class ChoiceReader:
    """Follows a choice-constrained stream: ``feed`` each delta's text; :attr:`chosen` is the candidate once the
    text so far starts only it (None while two or more still do)."""

    def __init__(self, options: Sequence[str]) -> None:
        self.options = tuple(options)
        self.text = ""
        self.chosen: str | None = None

    def feed(self, delta: str) -> str | None:
        """Add the model's next text; returns the chosen candidate when this delta decided it."""
        if self.chosen is not None:
            return None
        self.text += delta
        left = [o for o in self.options if o.startswith(self.text)]
        if len(left) == 1:
            self.chosen = left[0]
            return self.chosen
        if not left:  # not a grammar's output (a remote server that ignored it): the text is what was said
            self.chosen = self.text
            return None
        return None

    @property
    def rest(self) -> str:
        """The chosen candidate's text after what the model has produced."""
        return "" if self.chosen is None else self.chosen[len(self.text):]
