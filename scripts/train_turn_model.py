#!/usr/bin/env python
"""Train the end-of-turn model (app/turn_model): P(the caller is done) from the words at a pause.

    .venv/bin/pip install chitchat-dataset==0.9.0      # the training data (MIT; in requirements/test.txt)
    .venv/bin/python scripts/train_turn_model.py [--out app/turn_model/head.npz] [--report reports/turn_model.json]
        [--train-turns 24000] [--test-turns 6000] [--epochs 12] [--seed 0] [--question-weight 16]

Data: the Chit Chat Challenge dialogues (``chitchat-dataset`` 0.9.0 on PyPI, MIT: 7,168 conversations), one
sample per turn sampled: the whole turn (the messages one sender sent in a row) is a positive, a cut of it at a
word boundary a negative (turns of one word give a positive only); plus the project's own questions
(``QUESTION_FILES``; never the replay corpus the endpointing benchmark speaks): each whole, and each of its cuts,
the cuts weighing together as much as the whole, and a question ``--question-weight`` dialogue turns (the caller
of a support line asks questions more than a chat does). The split is by conversation (a conversation whose id hashes to 0 mod 10 is held out) and by
question (the same rule on the text). Features: ``sub250.turn_model.features`` (MiniLM's states, the last words
hashed). The head: a logistic regression (numpy, Adam, seeded), classes weighted to balance.

Prints and writes, per held-out source: AUC, and at each threshold the share of cuts called done (false
cut-offs) and of whole turns called done (the commits a pause would get at once). The head (``--out``) keeps the
metrics, the data's SHA-256, the seed and the counts; its own SHA-256 goes into the profile that ships it.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
import zlib
from importlib import resources
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from sub250.config import Settings  # noqa: E402
from sub250.modelstore import prepare  # noqa: E402
from sub250.profiles import load_profile  # noqa: E402
from sub250.turn_model import features as F  # noqa: E402

THRESHOLDS = (0.3, 0.5, 0.7, 0.8, 0.9, 0.95)
#: The project's own questions (not the replay corpus, scripts/corpus/questions.json: the endpointing benchmark
#: speaks that one, so it stays out of training).
QUESTION_FILES = ("tests/data/kb_questions.json", "tests/data/answers/questions.jsonl", "tests/data/tools/requests.jsonl")
BENCHMARK_QUESTIONS = "scripts/corpus/questions.json"


def held_out(key: str) -> bool:
    return zlib.crc32(key.encode()) % 10 == 0


def chitchat_samples(rng: np.random.Generator, train_turns: int, test_turns: int) -> tuple[dict, str]:
    """{"train"|"test": [(words, label, weight)]} from the dialogues, and the data file's SHA-256."""
    path = resources.files("chitchat_dataset") / "dataset.json"
    raw = path.read_bytes()
    data = json.loads(raw)
    turns: dict[str, list[str]] = {"train": [], "test": []}
    for cid in sorted(data):
        split = "test" if held_out(cid) else "train"
        for turn in data[cid]["messages"]:
            text = " ".join(m["text"] for m in turn if m.get("text"))
            if F.said(text):
                turns[split].append(text)
    out: dict[str, list] = {}
    for split, n in (("train", train_turns), ("test", test_turns)):
        pick = rng.choice(len(turns[split]), size=min(n, len(turns[split])), replace=False)
        out[split] = []
        for i in sorted(pick):
            out[split] += cut_samples(rng, F.said(turns[split][i]), every=False)
    return out, hashlib.sha256(raw).hexdigest()


def cut_samples(rng: np.random.Generator, words: str, *, every: bool,
                weight: float = 1.0) -> list[tuple[str, int, float]]:
    """The whole ``words`` (label 1) and a cut at a word boundary (0): one at random, or ``every`` cut. The whole
    weighs ``weight``, and so do its cuts together (every cut is not more evidence against an end than one)."""
    w = words.split()
    samples = [(" ".join(w[-F.USER_WORDS:]), 1, weight)]
    cuts = range(1, len(w)) if every else ([int(rng.integers(1, len(w)))] if len(w) > 1 else [])
    samples += [(" ".join(w[:k][-F.USER_WORDS:]), 0, weight / len(cuts)) for k in cuts]
    return samples


def question_samples(rng: np.random.Generator, weight: float = 1.0) -> dict:
    """{"train"|"test": [(words, label, weight)]}: each question whole and every cut of it; a training question
    weighs ``weight`` dialogue turns."""
    out: dict[str, list] = {"train": [], "test": []}
    texts: set[str] = set()
    for name in QUESTION_FILES:
        raw = (ROOT / name).read_text()
        items = [json.loads(line) for line in raw.splitlines() if line.strip()] if name.endswith(".jsonl") \
            else json.loads(raw)
        for item in items:
            text = item.get("text") or item.get("question")
            if isinstance(text, str) and F.said(text):
                texts.add(F.said(text))
    texts -= {F.said(q["text"]) for q in json.loads((ROOT / BENCHMARK_QUESTIONS).read_text())}
    for text in sorted(texts):
        split = "test" if held_out(text) else "train"
        out[split] += cut_samples(rng, text, every=True, weight=weight if split == "train" else 1.0)
    return out


def featurize(tokenizer, session, samples: list, batch: int = 64) -> tuple[np.ndarray, np.ndarray]:
    """(dense (n, 768), hashed (n, groups)) in the samples' order."""
    order = sorted(range(len(samples)), key=lambda i: len(samples[i][0]))
    dense = np.zeros((len(samples), 768), dtype=np.float32)
    t0 = time.perf_counter()
    for start in range(0, len(order), batch):
        idx = order[start:start + batch]
        dense[idx] = F.encoder_states(tokenizer, session, [samples[i][0] for i in idx])
        if start // batch % 100 == 0:
            print(f"  features {start + len(idx)}/{len(samples)} ({time.perf_counter() - t0:.0f} s)", flush=True)
    hashed = np.array([F.hashed(s[0]) for s in samples], dtype=np.int64)
    return dense, hashed


def train(dense: np.ndarray, hashed: np.ndarray, labels: np.ndarray, sample_weights: np.ndarray, *, epochs: int,
          seed: int, lr: float = 2e-3, l2: float = 1e-4, batch: int = 256) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    mean, std = dense.mean(axis=0), dense.std(axis=0) + 1e-6
    x = (dense - mean) / std
    w = np.zeros(x.shape[1], dtype=np.float64)
    v = np.zeros(F.HASH_GROUPS * F.HASH_BUCKETS, dtype=np.float64)
    b = 0.0
    # classes balanced by weight, the mean weight 1
    pos = (sample_weights * labels).sum() / sample_weights.sum()
    weights = sample_weights * np.where(labels == 1, 0.5 / pos, 0.5 / (1 - pos))
    weights *= len(weights) / weights.sum()
    m_w, s_w, m_v, s_v, m_b, s_b = (np.zeros_like(w), np.zeros_like(w), np.zeros_like(v), np.zeros_like(v), 0.0, 0.0)
    b1, b2, eps, t = 0.9, 0.999, 1e-8, 0
    for epoch in range(epochs):
        order = rng.permutation(len(labels))
        for start in range(0, len(order), batch):
            idx = order[start:start + batch]
            z = x[idx] @ w + v[hashed[idx]].sum(axis=1) + b
            p = 1 / (1 + np.exp(-z))
            g = (p - labels[idx]) * weights[idx] / len(idx)
            g_w = x[idx].T @ g + l2 * w
            g_v = np.zeros_like(v)
            np.add.at(g_v, hashed[idx].ravel(), np.repeat(g, hashed.shape[1]))
            g_v += l2 * v
            g_b = g.sum()
            t += 1
            m_w, s_w = b1 * m_w + (1 - b1) * g_w, b2 * s_w + (1 - b2) * g_w ** 2
            m_v, s_v = b1 * m_v + (1 - b1) * g_v, b2 * s_v + (1 - b2) * g_v ** 2
            m_b, s_b = b1 * m_b + (1 - b1) * g_b, b2 * s_b + (1 - b2) * g_b ** 2
            c1, c2 = 1 - b1 ** t, 1 - b2 ** t
            w -= lr * (m_w / c1) / (np.sqrt(s_w / c2) + eps)
            v -= lr * (m_v / c1) / (np.sqrt(s_v / c2) + eps)
            b -= lr * (m_b / c1) / (np.sqrt(s_b / c2) + eps)
        print(f"  epoch {epoch + 1}/{epochs}", flush=True)
    # the standardisation folds into the weights: z = dense @ w' + v[hashed].sum() + b'
    return {"dense_w": (w / std).astype(np.float32), "hashed_w": v.astype(np.float32),
            "bias": np.array([b - float((mean / std) @ w)], dtype=np.float32)}


def scores(head: dict[str, np.ndarray], dense: np.ndarray, hashed: np.ndarray) -> np.ndarray:
    z = dense @ head["dense_w"] + head["hashed_w"][hashed].sum(axis=1) + head["bias"][0]
    return 1 / (1 + np.exp(-z))


def auc(p: np.ndarray, labels: np.ndarray) -> float:
    ranks = np.argsort(np.argsort(p)) + 1
    n1 = int(labels.sum())
    n0 = len(labels) - n1
    return float((ranks[labels == 1].sum() - n1 * (n1 + 1) / 2) / (n1 * n0))


def metrics(p: np.ndarray, labels: np.ndarray) -> dict:
    return {"samples": int(len(labels)), "ends": int(labels.sum()), "cuts": int((labels == 0).sum()),
            "auc": round(auc(p, labels), 4),
            "at": {f"{t:g}": {"false_cut": round(float((p[labels == 0] >= t).mean()), 4),
                             "ends_done": round(float((p[labels == 1] >= t).mean()), 4)} for t in THRESHOLDS}}


def card(report: dict, args: argparse.Namespace) -> str:
    """The model's card (CARD.md beside the head): data, split, metrics - all from this run."""
    rows = []
    for name, m in report["held_out"].items():
        cells = " | ".join(f"{m['at'][f'{t:g}']['false_cut']:.1%} / {m['at'][f'{t:g}']['ends_done']:.1%}"
                           for t in THRESHOLDS)
        rows.append(f"| {name} | {m['ends']} / {m['cuts']} | {m['auc']:.3f} | {cells} |")
    return f"""# The end-of-turn model (app/turn_model)

P(the caller is done) from the words at a pause: a logistic head over all-MiniLM-L6-v2's states (the retrieval's
int8 ONNX model, shared) and the last words hashed (`app/turn_model/features.py`).

- **Head**: `head.npz`, sha256 `{report["head_sha256"]}` ({args.out.stat().st_size / 1e3:.0f} kB).
- **Made by** ({report["seconds"]:.0f} s on 2 CPU cores):
  `.venv/bin/python scripts/train_turn_model.py --train-turns {args.train_turns} --test-turns {args.test_turns} \\
  --epochs {args.epochs} --seed {args.seed} --question-weight {args.question_weight:g}`
- **Data**: the Chit Chat Challenge dialogues, `chitchat-dataset` 0.9.0 on PyPI (MIT licence; dataset.json
  sha256 `{report["data"]["chitchat_dataset_sha256"]}`), and the project's own questions
  (`{'`, `'.join(QUESTION_FILES)}`;
  Apache-2.0, this repository). The replay corpus
  (`{BENCHMARK_QUESTIONS}`), which the endpointing benchmark speaks, is left out.
- **Samples**: per dialogue turn sampled (the messages one sender sent in a row), the whole turn (done) and one
  cut at a word boundary chosen at random (not done); per question, the whole and every cut (the cuts weighing
  together as much as the whole), a question weighing {args.question_weight:g} dialogue turns.
  {report["train"]["samples"]} training samples, {report["train"]["ends"]} of them whole.
- **Split**: by conversation (id's crc32 mod 10 = 0 held out) and by question text (the same rule).
- **Not known to it**: punctuation (stripped: Whisper's is unreliable at a pause), the assistant's turn before,
  audio, the pause's length.

Held out: whole turns / cuts, AUC, and at each threshold on P(done) the share of cuts called done (false
cut-offs) / of whole turns called done:

| held out | whole / cuts | AUC | {" | ".join(f"t = {t:g}" for t in THRESHOLDS)} |
|---|---|---|{"---|" * len(THRESHOLDS)}
{chr(10).join(rows)}

What it does on speech (pauses inserted between words, real recordings): `scripts/bench_endpointing.py --words
--reader model`, docs/BENCHMARKS.md.
"""


def main(args: argparse.Namespace) -> int:
    import onnxruntime as ort

    t_start = time.perf_counter()
    settings = Settings.from_env()
    models = prepare(load_profile(settings.profile), settings.models_dir, stages=("embedder",))
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = args.threads
    session = ort.InferenceSession(str(models["embedder"]["model"]), sess_options=opts,
                                   providers=["CPUExecutionProvider"])
    tokenizer = F.tokenizer_for(str(models["embedder"]["tokenizer"]))
    rng = np.random.default_rng(args.seed)
    chat, data_sha = chitchat_samples(rng, args.train_turns, args.test_turns)
    questions = question_samples(rng, args.question_weight)
    sets = {"train": chat["train"] + questions["train"], "chitchat": chat["test"], "questions": questions["test"]}
    feats = {}
    for name, samples in sets.items():
        print(f"{name}: {len(samples)} samples", flush=True)
        feats[name] = (*featurize(tokenizer, session, samples), np.array([s[1] for s in samples], dtype=np.float64))
    head = train(*feats["train"], np.array([s[2] for s in sets["train"]]), epochs=args.epochs, seed=args.seed)
    report = {"seed": args.seed, "epochs": args.epochs, "question_weight": args.question_weight,
              "data": {"chitchat_dataset_sha256": data_sha},
              "train": {"samples": len(sets["train"]), "ends": int(feats["train"][2].sum())}, "held_out": {}}
    print(f"\n{'held out':10} {'n':>6} {'AUC':>6}  " + "  ".join(f"t={t:<4g} cut/done" for t in THRESHOLDS))
    for name in ("chitchat", "questions"):
        dense, hashed, labels = feats[name]
        m = report["held_out"][name] = metrics(scores(head, dense, hashed), labels)
        print(f"{name:10} {m['samples']:>6} {m['auc']:6.3f}  " + "  ".join(
            f"{m['at'][f'{t:g}']['false_cut']:5.1%}/{m['at'][f'{t:g}']['ends_done']:5.1%}" for t in THRESHOLDS))
    report["seconds"] = round(time.perf_counter() - t_start, 1)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    np.savez(args.out, **head, hash_buckets=np.array([F.HASH_BUCKETS]),
             report=np.array(json.dumps(report, sort_keys=True)))
    sha = hashlib.sha256(args.out.read_bytes()).hexdigest()
    report["head_sha256"] = sha
    if args.card:
        args.card.write_text(card(report, args))
    if args.report:
        args.report.parent.mkdir(parents=True, exist_ok=True)
        args.report.write_text(json.dumps(report, indent=2) + "\n")
    print(f"\nwrote {args.out} ({args.out.stat().st_size / 1e6:.1f} MB, sha256 {sha}) in {report['seconds']:.0f} s")
    return 0


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", type=Path, default=ROOT / "app/turn_model/head.npz")
    p.add_argument("--report", type=lambda v: Path(v) if v else None, default=ROOT / "reports/turn_model.json")
    p.add_argument("--card", type=lambda v: Path(v) if v else None, default=ROOT / "app/turn_model/CARD.md",
                   help="the model card written beside the head ('' for none)")
    p.add_argument("--train-turns", type=int, default=24000)
    p.add_argument("--test-turns", type=int, default=6000)
    p.add_argument("--epochs", type=int, default=12)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--question-weight", type=float, default=16.0,
                   help="dialogue turns one of the project's questions weighs in training (with its cuts)")
    p.add_argument("--threads", type=int, default=2)
    sys.exit(main(p.parse_args()))
