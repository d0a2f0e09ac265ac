"""What a profile chooses about answers (``[answer]``), read once into typed fields with documented defaults."""

from __future__ import annotations

from dataclasses import dataclass, replace

from sub250.answer.choice import CHOICE_HINT
from sub250.answer.extract import SPANS
from sub250.errors import ConfigError
from sub250.rag.about import About

MODES = ("generative", "grounded", "extractive", "choice")

#: The fixed reply of the declined path and the nudge after a long silence (``idle_timeout_ms``), when the
#: knowledge base says nothing about itself (app/rag/about.py: a KB's about.toml names its scope in them).
DECLINE_TEXT = About().decline_text
IDLE_TEXT = About().idle_text


@dataclass(frozen=True)
class AnswerPolicy:
    #: ``generative``: the LLM answers from the retrieved passages. ``grounded``: the LLM answers from the
    #: passage's sentences closest to the question only. ``extractive``: those sentences are the answer.
    #: ``choice``: the LLM answers with one of the extracts of the best passages or the decline, under a choice
    #: grammar (app/answer/choice.py): its tokens, the knowledge base's words.
    mode: str = "generative"
    #: The out-of-scope gate: below this cosine of the question to the best passage, the fixed
    #: ``decline_text`` answers (no LLM call). 0 turns the gate off.
    min_score: float = 0.0
    #: The same gate on the extract (``extractive`` / ``grounded``): below this cosine of the question to the
    #: best sentence found, the question is declined. 0 turns it off.
    min_extract_score: float = 0.0
    #: The same gate for a question with a subject word the knowledge base never uses (a product, place or
    #: topic it does not cover: app/rag/vocabulary.py): it needs at least this cosine to the best passage. 0:
    #: such a question is held to ``min_score`` like any other. Typed questions only: a transcript's unknown
    #: word is as often a mis-hearing (``Answerer.plan(heard=True)``).
    min_score_unfamiliar: float = 0.0
    #: From ``min_score`` up to this cosine the question is borderline: a generative prompt tells the model
    #: to say it does not know when the context does not answer.
    borderline_score: float = 0.0
    decline_text: str = DECLINE_TEXT
    #: What is said when the caller has been silent past ``idle_timeout_ms`` (the extractive mode; the
    #: generative ones ask the model).
    idle_text: str = IDLE_TEXT
    #: Sentences an extract holds (the best one and those after it).
    sentences: int = 2
    #: How the extract's sentences lie around the best one (app/answer/extract.py ``SPANS``): ``following``
    #: (it and those after it) or ``around`` (the run holding it that is closest on average).
    extract_span: str = "following"
    #: Passages searched for the extract's best sentence (best-first).
    extract_passages: int = 1
    #: ``choice``: the passages (best first) whose extract is a candidate answer; whether the decline is one
    #: too (else the gates alone decline); the line after the question telling the model what it answers with
    #: (``{decline}``: the decline's text).
    choices: int = 3
    choice_decline: bool = True
    choice_hint: str = CHOICE_HINT
    #: Weight of the question's subject words found in a sentence, beside its cosine, when picking it.
    lexical_weight: float = 0.0
    #: vLLM sampling penalties (1.0 / 0.0: off).
    repetition_penalty: float = 1.0
    frequency_penalty: float = 0.0
    #: Stop a generated reply at the first phrase loop (app/answer/loops.py).
    stop_loops: bool = True

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ConfigError(f"[answer] mode = {self.mode!r} is not one of {', '.join(MODES)}",
                              "fix the profile's [answer] section")
        if not all(0.0 <= v <= 1.0 for v in (self.min_score, self.min_score_unfamiliar, self.min_extract_score,
                                              self.borderline_score)):
            raise ConfigError("[answer] min_score, min_score_unfamiliar, min_extract_score and borderline_score are"
                              " cosines between 0 and 1", "fix the profile's [answer] section")
        if self.extract_span not in SPANS:
            raise ConfigError(f"[answer] extract_span = {self.extract_span!r} is not one of {', '.join(SPANS)}",
                              "fix the profile's [answer] section")
        if self.sentences < 1 or self.extract_passages < 1 or self.choices < 1:
            raise ConfigError("[answer] sentences, extract_passages and choices must be at least 1",
                              "fix the profile's [answer] section")

    @property
    def picks_sentences(self) -> bool:
        """The extractive, grounded and choice modes answer from the passage's sentences (the picker's)."""
        return self.mode in ("extractive", "grounded", "choice")

    def ungrounded(self) -> AnswerPolicy:
        """This policy with grounding turned off (``session.sub250.grounding: false``): no out-of-scope gate and
        no extract, the LLM answers from the retrieved passages."""
        return replace(self, mode="generative", min_score=0.0, min_extract_score=0.0, min_score_unfamiliar=0.0,
                       borderline_score=0.0)

    @classmethod
    def from_stage(cls, cfg: dict, about: About | None = None) -> AnswerPolicy:
        """``about``: the knowledge base's own texts, for the decline and the idle nudge the profile leaves out."""
        d = cls() if about is None else cls(decline_text=about.decline_text, idle_text=about.idle_text)
        return cls(
            mode=str(cfg.get("mode", d.mode)),
            min_score=float(cfg.get("min_score", d.min_score)),
            min_score_unfamiliar=float(cfg.get("min_score_unfamiliar", d.min_score_unfamiliar)),
            min_extract_score=float(cfg.get("min_extract_score", d.min_extract_score)),
            borderline_score=float(cfg.get("borderline_score", d.borderline_score)),
            decline_text=str(cfg.get("decline_text", d.decline_text)),
            idle_text=str(cfg.get("idle_text", d.idle_text)),
            sentences=int(cfg.get("sentences", d.sentences)),
            extract_span=str(cfg.get("extract_span", d.extract_span)),
            extract_passages=int(cfg.get("extract_passages", d.extract_passages)),
            choices=int(cfg.get("choices", d.choices)),
            choice_decline=bool(cfg.get("choice_decline", d.choice_decline)),
            choice_hint=str(cfg.get("choice_hint", d.choice_hint)),
            lexical_weight=float(cfg.get("lexical_weight", d.lexical_weight)),
            repetition_penalty=float(cfg.get("repetition_penalty", d.repetition_penalty)),
            frequency_penalty=float(cfg.get("frequency_penalty", d.frequency_penalty)),
            stop_loops=bool(cfg.get("stop_loops", d.stop_loops)),
        )
