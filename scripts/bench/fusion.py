"""The fusion of our end-of-turn model and smart-turn at a pause (scripts/bench_fusion.py): samples from an
endpointing report, the split, the fit, the scores. No I/O."""

from __future__ import annotations

import math
import zlib
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from sub250.session.turn_cue import as_said

WINDOW_MS = 32
#: smart-turn's score at 200 ms of silence: 6 windows after the last speech window (the benchmark's
#: ``smart-turn@200ms`` rules score there).
SMART_TURN_AFTER = 6


@dataclass(frozen=True)
class PauseSample:
    utterance: str  # "<group>/<id>"
    group: str
    done: bool  # the true end (True) or a pause inserted between two words (False)
    words: str
    model_logprob: float
    smart_turn: float


def pause_samples(report: dict) -> list[PauseSample]:
    """One sample per inserted pause and per true end of the report's streams, where the words were read and
    smart-turn scored at 200 ms."""
    logprobs: dict[str, float] = report["words_llm"]["scores"]
    out = []
    for stream in report["streams"]:
        if stream["variant"] == "paused":
            last = int(stream["pause"][0] // WINDOW_MS)  # the window the pause starts in
            done = False
        else:
            last = int(stream["speech_end_ms"] // WINDOW_MS) - 1  # speech_end_ms is its last window's end
            done = True
        # the transcript read at this pause: its key is the last speech window the VAD saw (at most a few
        # windows before the pause's start, never after the window it starts in)
        near = [(w, t) for w, t in stream["transcripts"] if last - 3 <= w <= last + 1]
        if not near:
            continue
        window, text = min(near, key=lambda wt: abs(wt[0] - last))
        scores = dict((w, p) for w, p in stream["scores"])
        # the benchmark's ModelJudge keeps its scores by the words as said
        if as_said(text) not in logprobs or window + SMART_TURN_AFTER not in scores:
            continue
        out.append(PauseSample(f"{stream['group']}/{stream['id']}", stream["group"], done, text,
                               logprobs[as_said(text)], scores[window + SMART_TURN_AFTER]))
    return out


def held_out(utterance: str) -> bool:
    """Half the utterances (all their pauses) are held out: by the crc32 of their name."""
    return zlib.crc32(utterance.encode()) % 2 == 1


def features(samples: Sequence[PauseSample]) -> np.ndarray:
    def logit(p: float) -> float:
        p = min(max(p, 1e-4), 1 - 1e-4)
        return math.log(p / (1 - p))

    return np.array([[s.model_logprob, logit(s.smart_turn), 1.0] for s in samples], dtype=np.float64)


def fit(samples: Sequence[PauseSample], *, l2: float = 1e-3, steps: int = 5000, lr: float = 0.5) -> list[float]:
    """Logistic regression on (model log P, smart-turn logit), classes weighted to balance; full-batch
    gradient descent from zero (deterministic)."""
    x = features(samples)
    y = np.array([s.done for s in samples], dtype=np.float64)
    pos = y.mean()
    weights = np.where(y == 1, 0.5 / pos, 0.5 / (1 - pos))
    w = np.zeros(x.shape[1])
    for _ in range(steps):
        p = 1 / (1 + np.exp(-(x @ w)))
        g = x.T @ ((p - y) * weights) / len(y)
        g[:-1] += l2 * w[:-1]
        w -= lr * g
    return [float(v) for v in w]


def scores(samples: Sequence[PauseSample], weights: Sequence[float]) -> dict[str, np.ndarray]:
    """P(done) of each sample by the model alone, smart-turn alone and the fusion."""
    x = features(samples)
    return {"model": np.exp(x[:, 0]), "smart-turn": np.array([s.smart_turn for s in samples]),
            "fusion": 1 / (1 + np.exp(-(x @ np.asarray(weights))))}


def auc(p: np.ndarray, labels: np.ndarray) -> float:
    """The chance that a true end scores above a cut (ties count half)."""
    pos, neg = p[labels == 1], p[labels == 0]
    greater = (pos[:, None] > neg[None, :]).sum() + 0.5 * (pos[:, None] == neg[None, :]).sum()
    return float(greater / (len(pos) * len(neg)))
