"""What a session needs of the server's engines, as a type: :class:`app.stack.Stack` provides it once started,
and a unit test's fake provides the same names. The session and its parts are checked against it."""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from sub250.asr.base import ASREngine
from sub250.llm.base import LLMEngine
from sub250.profiles import Profile
from sub250.rag.base import BaseRetriever
from sub250.tts.base import TTSEngine


@runtime_checkable
class Engines(Protocol):
    profile: Profile
    #: What the knowledge base is about (``app.rag.about``), read into the pipeline's tuning; None: unknown.
    about: Any
    #: Each session's Silero VAD state is made from it (``TurnDetector``).
    vad_session: Any
    asr: ASREngine
    retriever: BaseRetriever
    llm: LLMEngine
    tts: TTSEngine
    #: The end-of-turn model (smart-turn) for ``semantic_vad``; None: the profile has none.
    end_of_turn: Any
    #: Our end-of-turn model on the words at a pause (app/turn_model; ``[vad] reader = "model"``); None: the
    #: profile reads them with the LLM, or not at all.
    turn_model: Any
    #: The sentence picker the extract answers with (an embedder's); None: none loaded.
    picker: Any
    #: Ranks the client's tools by the question before the LLM picks one; None: none loaded.
    tool_selector: Any
    #: The knowledge base's words (the extract's check that a question is in scope); None: none loaded.
    vocabulary: Any
