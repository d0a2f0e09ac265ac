"""Bag-of-words unit vectors: a stand-in for the embedder in the unit tests of the code around it."""

import asyncio

import numpy as np


def bag(text: str, vocab: list[str]) -> np.ndarray:
    """A unit vector over ``vocab``: 1 for each of its words in ``text`` (lower case), a little for the rest."""
    t = text.lower()
    v = np.array([float(w in t) for w in vocab], dtype=np.float32) + 1e-3
    return v / np.linalg.norm(v)


class BagEmbed:
    """``await embed(texts)`` -> (n, len(vocab)) bag vectors; remembers each call's texts."""

    def __init__(self, vocab: list[str]):
        self.vocab = vocab
        self.calls: list[list[str]] = []

    async def __call__(self, texts):
        self.calls.append(list(texts))
        await asyncio.sleep(0)
        return np.stack([bag(t, self.vocab) for t in texts])
