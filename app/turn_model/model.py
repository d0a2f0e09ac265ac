"""The end-of-turn model at run time: a logistic head (``head.npz``) over MiniLM's states and the last words.

It shares the retrieval's MiniLM session (``Embedder.session``: onnxruntime sessions serve concurrent runs) and
runs on the embedder's threads; its own tokenizer keeps the caller's last
:data:`~sub250.turn_model.features.MAX_TOKENS` tokens. ``scripts/train_turn_model.py`` makes the head; its card is
``CARD.md``.
"""

from __future__ import annotations

import hashlib
import math
from pathlib import Path
from typing import Any

import numpy as np

from sub250.errors import ModelError
from sub250.turn_model import features as F

#: The head shipped in the package (trained by scripts/train_turn_model.py).
HEAD = Path(__file__).with_name("head.npz")


class TurnModel:
    def __init__(self, embedder: Any, tokenizer: Path, head: Path = HEAD, sha256: str | None = None) -> None:
        """``embedder``: the loaded :class:`~sub250.rag.embedder.Embedder` whose session and threads it uses."""
        self.embedder, self.tokenizer_path, self.head_path, self.sha256 = embedder, tokenizer, head, sha256
        self.tokenizer: Any = None
        self.dense_w: np.ndarray | None = None
        self.hashed_w: np.ndarray | None = None
        self.bias = 0.0

    def load(self) -> None:
        try:
            raw = self.head_path.read_bytes()
        except OSError as exc:
            raise ModelError(f"end-of-turn head {self.head_path} cannot be read: {exc}",
                             "run scripts/train_turn_model.py, or reinstall sub250") from None
        if self.sha256 and hashlib.sha256(raw).hexdigest() != self.sha256:
            raise ModelError(f"end-of-turn head {self.head_path} does not match its sha256 {self.sha256}",
                             "reinstall sub250, or set [vad] model_sha256 to the head you trained") from None
        with np.load(self.head_path, allow_pickle=False) as head:
            missing = {"dense_w", "hashed_w", "bias", "hash_buckets"} - set(head.files)
            if missing or int(head["hash_buckets"][0]) != F.HASH_BUCKETS or head["dense_w"].shape != (768,):
                raise ModelError(f"end-of-turn head {self.head_path} is not one this version reads",
                                 "retrain it with scripts/train_turn_model.py") from None
            self.dense_w, self.hashed_w = head["dense_w"], head["hashed_w"]
            self.bias = float(head["bias"][0])
        self.tokenizer = F.tokenizer_for(str(self.tokenizer_path))

    def probability(self, words: str) -> float:
        """P(the caller is done) after ``words`` (the transcript so far). Blocking: from async code,
        :meth:`done_logprob`."""
        assert self.dense_w is not None and self.hashed_w is not None, "load() first"
        user = F.last_words(words, F.USER_WORDS)
        dense = F.encoder_states(self.tokenizer, self.embedder.session, [user])[0]
        z = float(dense @ self.dense_w) + float(self.hashed_w[F.hashed(user)].sum()) + self.bias
        return 1 / (1 + math.exp(-max(-60.0, min(60.0, z))))

    async def done_logprob(self, words: str) -> float:
        p = await self.embedder.run(self.probability, words)
        return math.log(max(p, 1e-12))

    async def turn_end_logprob(self, text: str, request_id: str) -> float | None:
        """What :class:`~sub250.session.turn_words.TurnWords` asks of a reader (as of ``LLMEngine``)."""
        return await self.done_logprob(text)
