"""The end-of-turn model's inputs, the same for training and serving.

* the words as said: lower case, no punctuation (Whisper's is unreliable at a pause: it writes "How far from the?"
  as readily as "Where is it?"), the last ``USER_WORDS`` words;
* MiniLM's hidden states over the caller's words: their mean and the state of the last word's last token (the
  assistant's turn before is not read: with it, the held-out dialogues scored no better, AUC 0.847 against 0.850
  without, and a call took half as long again - lab/JOURNAL.md §45);
* hashed identities of the last word, the last two and the last three words, and the length in words (buckets).
"""

from __future__ import annotations

import re
import zlib
from typing import Any

import numpy as np

USER_WORDS = 32
MAX_TOKENS = 64
#: Buckets per hashed group (last word, last two words, last three words, length).
HASH_BUCKETS = 4096
HASH_GROUPS = 4
LENGTH_BUCKETS = (1, 2, 3, 4, 5, 6, 8, 10, 13, 17, 22, 30)

_NOT_WORD = re.compile(r"[^\w' ]+")
_SPACES = re.compile(r"\s+")


def said(text: str) -> str:
    """``text`` as said: lower case, punctuation and symbols gone (an apostrophe inside a word stays)."""
    text = _NOT_WORD.sub(" ", text.lower().replace("_", " "))
    words = [w.strip("'") for w in _SPACES.split(text)]
    return " ".join(w for w in words if w)


def last_words(text: str, n: int) -> str:
    words = said(text).split()
    return " ".join(words[-n:])


def _bucket(group: int, key: str) -> int:
    return group * HASH_BUCKETS + zlib.crc32(key.encode()) % HASH_BUCKETS


def hashed(user: str) -> list[int]:
    """The indices of the caller's words' hashed features (``user`` already :func:`said`)."""
    words = user.split()
    if not words:
        return [_bucket(3, "len:0")]
    n = len(words)
    length = next((i for i, top in enumerate(LENGTH_BUCKETS) if n <= top), len(LENGTH_BUCKETS))
    return [_bucket(0, words[-1]), _bucket(1, " ".join(words[-2:])), _bucket(2, " ".join(words[-3:])),
            _bucket(3, f"len:{length}")]


def encoder_states(tokenizer: Any, session: Any, users: list[str]) -> np.ndarray:
    """(n, 768) float32: MiniLM's mean state over each caller's tokens ([CLS] and [SEP] left out) and its last
    token's state. ``users`` already cut to their last words (:func:`last_words`). Blocking (onnxruntime)."""
    encs = tokenizer.encode_batch(users)
    width = max(len(e.ids) for e in encs)
    ids = np.zeros((len(encs), width), dtype=np.int64)
    mask = np.zeros_like(ids)
    for i, e in enumerate(encs):
        ids[i, :len(e.ids)], mask[i, :len(e.ids)] = e.ids, e.attention_mask
    (hidden,) = session.run(None, {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)})
    lengths = mask.sum(axis=1)  # [CLS] words [SEP]
    user = mask.astype(bool)
    user[:, 0] = False
    user[np.arange(len(encs)), lengths - 1] = False
    counts = user.sum(axis=1)
    mean = (hidden * user[..., None]).sum(axis=1) / np.maximum(counts, 1)[:, None]
    last = hidden[np.arange(len(encs)), np.where(counts > 0, lengths - 2, 0)]
    return np.concatenate([mean, last], axis=1).astype(np.float32)


def tokenizer_for(path: str) -> Any:
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(path)
    # from the left: the caller's last words are kept
    tokenizer.enable_truncation(MAX_TOKENS, direction="left")
    tokenizer.no_padding()
    return tokenizer
