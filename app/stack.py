"""The running stack: every engine loaded once, the database started and migrated.

``Stack.start(stages)`` loads what is asked (all by default); CPU-heavy loads run in threads.
The server, ``doctor``, ``ingest`` and the tests all build on this one object.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from sub250.config import Settings
from sub250.errors import Sub250Error
from sub250.modelstore import PreparedModels, prepare
from sub250.profiles import Profile, load_profile

if TYPE_CHECKING:
    from sub250.answer.extract import SentencePicker
    from sub250.asr.base import ASREngine
    from sub250.db.embedded import EmbeddedPostgres
    from sub250.llm.base import LLMEngine
    from sub250.rag.base import BaseRetriever
    from sub250.rag.embedder import Embedder
    from sub250.rag.rerank import Reranker
    from sub250.rag.store import VectorStore
    from sub250.rag.vocabulary import Vocabulary
    from sub250.tools.selector import EmbeddingSelector
    from sub250.tts.base import TTSEngine

log = logging.getLogger(__name__)

ALL = ("db", "vad", "asr", "embedder", "llm", "tts", "turn")


@dataclass
class Stack:
    settings: Settings
    profile: Profile
    models: PreparedModels | None = None
    pg: EmbeddedPostgres | None = None  # when DATABASE_URL is unset
    dsn: str = ""
    pool: Any = None  # asyncpg.Pool
    #: Silero VAD's ONNX session (onnxruntime.InferenceSession), shared: each audio stream keeps its own state.
    vad_session: Any = None
    asr: ASREngine | None = None
    embedder: Embedder | None = None
    store: VectorStore | None = None
    retriever: BaseRetriever | None = None
    llm: LLMEngine | None = None
    tts: TTSEngine | None = None
    #: The semantic end-of-turn model (smart-turn; ``[turn]`` in the profile), for ``semantic_vad`` sessions.
    end_of_turn: Any = None
    #: Our end-of-turn model on the words at a pause (``[vad] reader = "model"``; it shares the embedder's session).
    turn_model: Any = None
    #: The extractive answer path's sentence picker (its sentence embeddings are shared by every session).
    picker: SentencePicker | None = None
    #: The retrieval's reranker (``[embedder] rerank``; its title vectors shared by every session).
    reranker: Reranker | None = None
    #: What the knowledge base says of itself (its about.toml, app/rag/about.py), read by :meth:`warm_answers`.
    about: Any = None
    #: The knowledge base's words (the answer's ``min_score_unfamiliar``), made by :meth:`warm_answers`.
    vocabulary: Vocabulary | None = None
    #: The embedding tool selector (tool description vectors, shared by every session).
    tool_selector: EmbeddingSelector | None = None
    load_seconds: dict[str, float] = field(default_factory=dict)

    @classmethod
    def from_settings(cls, settings: Settings) -> Stack:
        return cls(settings=settings, profile=load_profile(settings.profile))

    @property
    def embedding_model_id(self) -> str:
        return str(self.profile.stage("embedder").get("source", "embedder"))

    async def start(self, stages: tuple[str, ...] = ALL, progress: Callable[[str], None] | None = None) -> None:
        model_stages = tuple(s for s in stages if s != "db" and (s != "turn" or self.profile.stage("turn")))
        if "db" in stages and "embedder" not in model_stages:
            model_stages += ("embedder",)  # the store is useless without its query embedder
        t0 = time.perf_counter()
        self.models = await asyncio.to_thread(prepare, self.profile, self.settings.models_dir, stages=model_stages)
        self.load_seconds["prepare"] = time.perf_counter() - t0
        for stage in ALL:
            if stage in stages or (stage == "embedder" and "db" in stages):
                if progress:
                    progress(stage)
                t = time.perf_counter()
                await getattr(self, f"_start_{stage}")()
                self.load_seconds[stage] = time.perf_counter() - t

    def _paths(self, stage: str) -> dict[str, Any]:
        """The prepared model files of ``stage`` (``start`` prepares them first)."""
        assert self.models is not None, "start() prepares the models first"
        return self.models[stage]

    async def _start_db(self) -> None:
        from sub250.db.pool import create_pool
        from sub250.rag.store import VectorStore

        if self.settings.database_url:
            self.dsn = self.settings.database_url
        else:
            from sub250.db.embedded import EmbeddedPostgres

            self.pg = EmbeddedPostgres(self.settings.pgdata_dir)
            self.dsn = await asyncio.to_thread(self.pg.start)
        self.pool = await create_pool(self.dsn, size=self.settings.db_pool_size, ef_search=self.settings.hnsw_ef_search)
        self.store = VectorStore(self.pool)

    async def _start_vad(self) -> None:
        from sub250.audio.vad import SileroVAD

        self.vad_session = await asyncio.to_thread(SileroVAD.load_session, self._paths("vad")["model"])

    async def _start_asr(self) -> None:
        from sub250.asr.whisper import WhisperASR

        self.asr = WhisperASR(self._paths("asr")["model"], self.profile.stage("asr"))
        await asyncio.to_thread(self.asr.load)

    async def _start_turn(self) -> None:
        if not self.profile.stage("turn"):
            return  # a profile without [turn]: semantic_vad is refused (session.update says why)
        from sub250.audio.smart_turn import SmartTurn

        self.end_of_turn = SmartTurn(self._paths("turn")["model"], self.profile.stage("turn"))
        await asyncio.to_thread(self.end_of_turn.load)

    async def _start_embedder(self) -> None:
        from sub250.rag.embedder import Embedder

        if self.embedder is None:
            m = self._paths("embedder")
            self.embedder = Embedder(m["model"], m["tokenizer"], self.profile.stage("embedder"))
            await asyncio.to_thread(self.embedder.load)
        from sub250.turn_model import words_reader

        if self.turn_model is None and words_reader(self.profile) == "model":
            from sub250.turn_model.model import TurnModel

            self.turn_model = TurnModel(self.embedder, self._paths("embedder")["tokenizer"],
                                        sha256=self.profile.stage("vad").get("model_sha256"))
            await asyncio.to_thread(self.turn_model.load)
        embed = self.embed_texts
        if self.picker is None:
            from sub250.answer.extract import SentencePicker

            self.picker = SentencePicker(embed)
        if self.store is not None and self.retriever is None:
            from sub250.rag.query_cache import QueryCache
            from sub250.rag.rerank import Reranker
            from sub250.rag.retriever import RetrievalOptions, Retriever

            cfg = self.profile.stage("embedder")
            opts = RetrievalOptions.from_stage(cfg)
            entries = int(cfg.get("query_cache_entries", 256))
            cache = QueryCache(entries, near_threshold=cfg.get("near_duplicate_cosine"),
                               ttl_s=float(cfg.get("query_cache_ttl_s", 300))) if entries > 0 else None
            if opts.rerank:
                self.reranker = Reranker(embed, self.picker, opts.weights)
            self.retriever = Retriever(self.embedder, self.store, self.settings.rag_top_k, cache=cache, options=opts,
                                       reranker=self.reranker)
        if self.tool_selector is None:
            from sub250.tools.selector import EmbeddingSelector

            self.tool_selector = EmbeddingSelector(embed)

    async def embed_texts(self, texts: list[str]) -> Any:
        """Unit vectors (n, dim) of ``texts`` by the embedder, in its threads (off the event loop)."""
        assert self.embedder is not None, "the embedder is not loaded"
        return await self.embedder.run(self.embedder.embed, texts)

    async def _start_llm(self) -> None:
        from sub250.llm import create_engine

        self.llm = create_engine(self.profile.stage("llm"), self._paths("llm")["model"], self.settings)
        await self.llm.start()

    async def _start_tts(self) -> None:
        from sub250.tts.piper import PiperTTS

        m = self._paths("tts")
        self.tts = PiperTTS(m["model"], m["config"], self.profile.stage("tts"))
        await asyncio.to_thread(self.tts.load)

    async def warm_answers(self) -> int:
        """Everything the answers compute from the knowledge base, made before the first caller: every
        passage's sentences embedded for the sentence picker and the reranker (measured: up to 84 ms of a
        turn's ``prompt`` span otherwise), the titles and the BM25 index for the reranker, the KB's vocabulary
        for the answer's ``min_score_unfamiliar``. Returns the passages held (0: the profile's answers use none of it)."""
        from sub250.answer.policy import AnswerPolicy
        from sub250.rag.vocabulary import Vocabulary

        if self.store is not None:
            from sub250.rag.about import About

            found = await self.store.about()
            self.about = None if found is None else About(*found)
        policy = AnswerPolicy.from_stage(self.profile.stage("answer"))
        if self.picker is None or self.store is None:
            return 0
        if not (policy.picks_sentences or self.reranker is not None or policy.min_score_unfamiliar):
            return 0
        # read once: the picker holds up to its own bound, the vocabulary is the whole KB's
        passages = await self.store.passages()
        held = await self.picker.warm(passages)
        if self.reranker is not None:
            await self.reranker.warm(passages)
        if policy.min_score_unfamiliar:
            self.vocabulary = Vocabulary.from_texts(f"{p.title} {p.content}" for p in passages)
        return held

    async def close(self) -> None:
        errors: list[str] = []
        for engine in (self.asr, self.tts, self.embedder, self.end_of_turn):
            if engine is not None:
                engine.close_threads()
        if self.llm is not None:
            try:
                await self.llm.close()
            except Exception as exc:  # report, keep closing the rest
                errors.append(f"llm: {exc}")
            self.llm = None
        if self.pool is not None:
            await self.pool.close()
            self.pool = None
        if self.pg is not None:
            await asyncio.to_thread(self.pg.stop)
            self.pg = None
        if errors:
            raise Sub250Error("closing the stack failed: " + "; ".join(errors))
