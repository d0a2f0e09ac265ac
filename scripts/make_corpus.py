#!/usr/bin/env python
"""Synthesize the replay corpus: every question of scripts/corpus/questions.json spoken by the Piper voice.

    .venv/bin/python scripts/make_corpus.py [OUT_DIR]     (default: $SUB250_HOME/corpus)

Writes one WAV per question (cached: unchanged texts are not synthesized again) and a manifest.json with
the texts as references, usable as `scripts/replay.py --corpus OUT_DIR/manifest.json`.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from scripts.bench.corpus import synthesize_corpus  # noqa: E402
from sub250.config import Settings  # noqa: E402


def main() -> int:
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else Settings.from_env().home / "corpus"
    utts = synthesize_corpus(out)
    manifest = [{"id": u.id, "path": u.path.name, "reference": u.reference, "kind": u.kind} for u in utts]
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1))
    print(f"{len(utts)} spoken questions in {out} (manifest: {out / 'manifest.json'})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
