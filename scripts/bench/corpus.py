"""The replay corpus: spoken questions about the sample knowledge base, rendered by the Piper voice with no
noise (``PiperTTS.render``: the same WAV on every machine and run) from ``scripts/corpus/questions.json`` (texts
are the references), plus the real recordings in
``tests/data/audio`` (see its README for their sources and licences)."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sub250.tts.piper import PiperTTS

REPO = Path(__file__).resolve().parents[2]
QUESTIONS = REPO / "scripts" / "corpus" / "questions.json"
REAL_AUDIO = REPO / "tests" / "data" / "audio"


@dataclass(frozen=True)
class Utterance:
    id: str
    path: Path
    reference: str | None
    kind: str  # "synthetic" | "real"


def synthesize_corpus(out_dir: Path, tts: PiperTTS | None = None, *, lead_silence_s: float = 0.3) -> list[Utterance]:
    """Write one WAV per question of the replay corpus (cached by text hash); return the utterances."""
    questions = json.loads(QUESTIONS.read_text())
    return synthesize_texts([(q["id"], q["text"]) for q in questions], out_dir, tts, lead_silence_s=lead_silence_s)


def synthesize_texts(items: list[tuple[str, str]], out_dir: Path, tts: PiperTTS | None = None, *,
                     lead_silence_s: float = 0.3) -> list[Utterance]:
    """One WAV per ``(id, text)`` spoken by the Piper voice (cached by text hash); the texts are the references."""
    import numpy as np
    import soundfile as sf

    out_dir.mkdir(parents=True, exist_ok=True)
    utts = []
    for uid, text in items:
        digest = hashlib.sha1(b"fixed:" + text.encode()).hexdigest()[:8]  # not a noisy rendering of before
        path = out_dir / f"{uid}-{digest}.wav"
        if not path.exists():
            if tts is None:
                tts = _load_tts()
            pcm16, rate = tts.render(text)
            pcm = np.frombuffer(pcm16, dtype="<i2")
            audio = np.concatenate([np.zeros(int(lead_silence_s * rate), dtype="<i2"), pcm])
            tmp = path.with_suffix(".tmp.wav")
            sf.write(tmp, audio, rate, subtype="PCM_16")
            tmp.replace(path)
        utts.append(Utterance(uid, path, text, "synthetic"))
    return utts


def _load_tts() -> PiperTTS:
    from sub250.config import Settings
    from sub250.modelstore import prepare
    from sub250.profiles import load_profile
    from sub250.tts.piper import PiperTTS

    settings = Settings.from_env()
    profile = load_profile(settings.profile)
    m = prepare(profile, settings.models_dir, stages=("tts",))["tts"]
    tts = PiperTTS(m["model"], m["config"], profile.stage("tts"))
    tts.load()
    return tts


def real_recordings(folder: Path = REAL_AUDIO) -> list[Utterance]:
    """The real recordings (``tests/data/audio``, part of the repository) with their reference transcripts."""
    if not folder.is_dir():
        raise FileNotFoundError(f"{folder}: no such folder of real recordings")
    refs_path = folder / "transcripts.json"
    refs = json.loads(refs_path.read_text()) if refs_path.exists() else {}
    return [Utterance(p.stem, p, refs.get(p.stem), "real") for p in sorted(folder.glob("*.wav"))]


def load_manifest(path: Path) -> list[Utterance]:
    """A folder of WAVs (references from ``transcripts.json`` or ``<name>.txt`` beside them), or a JSON
    manifest ``[{"id", "path", "reference"}]``."""
    if path.is_dir():
        refs_path = path / "transcripts.json"
        refs = json.loads(refs_path.read_text()) if refs_path.exists() else {}
        out = []
        for p in sorted(path.glob("*.wav")):
            txt = p.with_suffix(".txt")
            ref = refs.get(p.stem) or (txt.read_text().strip() if txt.exists() else None)
            out.append(Utterance(p.stem, p, ref, "file"))
        return out
    items = json.loads(path.read_text())
    return [Utterance(i["id"], (path.parent / i["path"]).resolve(), i.get("reference"), i.get("kind", "file"))
            for i in items]
