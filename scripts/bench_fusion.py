#!/usr/bin/env python
"""Does smart-turn add to our end-of-turn model? A fusion fitted on half the endpointing benchmark's utterances.

    .venv/bin/python scripts/bench_fusion.py reports/endpointing45-model-run1.json [--out reports/fusion45.json]

Reads a report of ``scripts/bench_endpointing.py --words --reader model`` (its streams keep smart-turn's scores
by window and Whisper's transcripts by last speech window, and the model's log P(done) of each transcript). Each
pause the caller made is one sample at 200 ms of its silence: the inserted pause of a paused stream (not done)
and the true end of an utterance (done), with two features: the model's log P(done) of the words at the pause
(read at 64 ms) and the logit of smart-turn's score at 200 ms. The utterances are split in two by their id's
crc32 (``scripts/bench/fusion.py``); a logistic regression on both features is fitted on one half and scored on
the other. Prints, for the held-out half, each score's AUC (the model alone, smart-turn alone, the fusion) and at
each threshold the share of pauses called done (each a false cut-off at 200 ms) and of true ends called done
(each committed at 200 ms rather than at the cap), per speech kind; writes JSON.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from scripts.bench import fusion  # noqa: E402

THRESHOLDS = (0.3, 0.5, 0.7, 0.9)


def main(args: argparse.Namespace) -> int:
    report = json.loads(Path(args.report).read_text())
    if not report.get("words_llm") or report["words_llm"].get("reader") != "model":
        raise SystemExit(f"bench_fusion: {args.report} is not a run of bench_endpointing.py --words --reader model")
    samples = fusion.pause_samples(report)
    train = [s for s in samples if not fusion.held_out(s.utterance)]
    test = [s for s in samples if fusion.held_out(s.utterance)]
    if not train or not test or len({s.done for s in train}) < 2:
        raise SystemExit("bench_fusion: too few pauses on one side of the split")
    weights = fusion.fit(train)
    result: dict = {"report": args.report, "samples": len(samples), "train": len(train), "test": len(test),
                    "weights": {"model_logprob": weights[0], "smart_turn_logit": weights[1], "bias": weights[2]},
                    "held_out": {}}
    print(f"{len(samples)} pauses ({sum(s.done for s in samples)} true ends); fitted on {len(train)}, "
          f"scored on {len(test)}: P(done) = sigmoid({weights[0]:.3f} * model log P + {weights[1]:.3f} * "
          f"smart-turn logit + {weights[2]:.3f})\n")
    print(f"{'held out':<11}{'score':<12}{'ends/cuts':>10}{'AUC':>7}  "
          + "  ".join(f"P>={t:<4g}cut/done" for t in THRESHOLDS))
    for group in ("synthetic", "real", "all"):
        mine = [s for s in test if group in ("all", s.group)]
        labels = np.array([s.done for s in mine], dtype=float)
        if len(set(labels)) < 2:
            continue
        for name, p in fusion.scores(mine, weights).items():
            row = {"auc": fusion.auc(p, labels), "ends": int(labels.sum()), "cuts": int((labels == 0).sum()),
                   "at": {f"{t:g}": {"cut": float((p[labels == 0] >= t).mean()),
                                    "done": float((p[labels == 1] >= t).mean())} for t in THRESHOLDS}}
            result["held_out"][f"{group}/{name}"] = row
            print(f"{group:<11}{name:<12}{row['ends']:>4}/{row['cuts']:<5}{row['auc']:>7.3f}  " + "  ".join(
                f"{row['at'][f'{t:g}']['cut']:5.1%}/{row['at'][f'{t:g}']['done']:5.1%}" for t in THRESHOLDS))
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1) + "\n")
    print(f"\nwrote {out}")
    return 0


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("report", help="a JSON report of bench_endpointing.py --words --reader model")
    p.add_argument("--out", default="reports/fusion.json")
    raise SystemExit(main(p.parse_args()))
