"""The session object of ``session.update`` / ``session.created``: typed, with defaults, validated."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from app.protocol.events import ProtocolError

AUDIO_RATE = 24_000
DEFAULT_INSTRUCTIONS = (
    "You are the voice support agent of Halden Labs. Answer the caller's question in one or two short, "
    "friendly sentences, using only the facts in the context."
)


@dataclass(frozen=True)
class TurnDetection:
    """Server VAD endpointing (``turn_detection``; ``None`` means the client commits)."""

    threshold: float = 0.5
    #: Silence after speech that ends the turn.
    silence_duration_ms: int = 500
    #: Audio kept before the detected speech start.
    prefix_padding_ms: int = 300
    create_response: bool = True
    interrupt_response: bool = True

    def to_wire(self) -> dict[str, Any]:
        return {"type": "server_vad", "threshold": self.threshold, "silence_duration_ms": self.silence_duration_ms,
                "prefix_padding_ms": self.prefix_padding_ms, "create_response": self.create_response,
                "interrupt_response": self.interrupt_response}


@dataclass(frozen=True)
class SessionConfig:
    id: str = ""
    model: str = "sub250"
    instructions: str = DEFAULT_INSTRUCTIONS
    output_modalities: tuple[str, ...] = ("audio",)
    turn_detection: TurnDetection | None = field(default_factory=TurnDetection)
    max_output_tokens: int = 96
    voice: str = "joe"
    transcription: bool = True
    #: sub250 extension (``session.sub250.speculative_turns``): prepare the reply at the first pause, before
    #: the turn is committed. None: the profile's choice (``[vad] speculate_after_ms``).
    speculative_turns: bool | None = None

    def to_wire(self) -> dict[str, Any]:
        return {
            "type": "realtime",
            "object": "realtime.session",
            "id": self.id,
            "model": self.model,
            "instructions": self.instructions,
            "output_modalities": list(self.output_modalities),
            "max_output_tokens": self.max_output_tokens,
            "audio": {
                "input": {
                    "format": {"type": "audio/pcm", "rate": AUDIO_RATE},
                    "turn_detection": self.turn_detection.to_wire() if self.turn_detection else None,
                    "transcription": {"model": "whisper"} if self.transcription else None,
                },
                "output": {"format": {"type": "audio/pcm", "rate": AUDIO_RATE}, "voice": self.voice},
            },
        }

    def updated(self, session: dict[str, Any], event_id: str | None = None) -> "SessionConfig":
        """Apply a ``session.update`` payload; raise ProtocolError on the first bad field."""

        def bad(param: str, message: str, code: str = "invalid_value") -> ProtocolError:
            return ProtocolError(code, message, param=f"session.{param}", event_id=event_id)

        cfg = self
        if "type" in session and session["type"] != "realtime":
            raise bad("type", "only 'realtime' sessions are supported")
        if "instructions" in session:
            if not isinstance(session["instructions"], str):
                raise bad("instructions", "'instructions' must be a string")
            cfg = replace(cfg, instructions=session["instructions"])
        if "output_modalities" in session:
            mods = session["output_modalities"]
            if not isinstance(mods, list) or not mods or not set(mods) <= {"text", "audio"}:
                raise bad("output_modalities", "'output_modalities' must be ['audio'] or ['text']")
            cfg = replace(cfg, output_modalities=tuple(mods))
        if "max_output_tokens" in session:
            mot = session["max_output_tokens"]
            if mot == "inf":
                mot = 512
            if not isinstance(mot, int) or isinstance(mot, bool) or not 1 <= mot <= 4096:
                raise bad("max_output_tokens", "'max_output_tokens' must be 1..4096 or 'inf'")
            cfg = replace(cfg, max_output_tokens=mot)
        ext = session.get("sub250")
        if ext is not None:
            if not isinstance(ext, dict):
                raise bad("sub250", "'sub250' must be an object")
            if "speculative_turns" in ext:
                if not isinstance(ext["speculative_turns"], bool):
                    raise bad("sub250.speculative_turns", "'speculative_turns' must be true or false")
                cfg = replace(cfg, speculative_turns=ext["speculative_turns"])
        audio = session.get("audio")
        if audio is not None:
            if not isinstance(audio, dict):
                raise bad("audio", "'audio' must be an object")
            inp = audio.get("input") or {}
            out = audio.get("output") or {}
            for where, part in (("input", inp), ("output", out)):
                fmt = part.get("format")
                if fmt is not None:
                    if not isinstance(fmt, dict) or fmt.get("type") != "audio/pcm":
                        raise bad(f"audio.{where}.format.type", "only 'audio/pcm' (PCM16 mono) is supported",
                                  "unsupported_audio_format")
                    if fmt.get("rate", AUDIO_RATE) != AUDIO_RATE:
                        raise bad(f"audio.{where}.format.rate",
                                  f"audio/pcm must be {AUDIO_RATE} Hz (got {fmt.get('rate')}); resample on the client",
                                  "unsupported_audio_format")
            if "turn_detection" in inp:
                cfg = replace(cfg, turn_detection=_turn_detection(inp["turn_detection"], cfg.turn_detection, bad))
            if "transcription" in inp:
                cfg = replace(cfg, transcription=inp["transcription"] is not None)
            if "voice" in out:
                if not isinstance(out["voice"], str):
                    raise bad("audio.output.voice", "'voice' must be a string")
                cfg = replace(cfg, voice=out["voice"])
        return cfg


def _turn_detection(td: Any, current: TurnDetection | None, bad: Any) -> TurnDetection | None:
    if td is None:
        return None
    if not isinstance(td, dict):
        raise bad("audio.input.turn_detection", "'turn_detection' must be an object or null")
    if td.get("type", "server_vad") != "server_vad":
        raise bad("audio.input.turn_detection.type", "only 'server_vad' turn detection is supported")
    base = current or TurnDetection()
    out = base
    if "threshold" in td:
        t = td["threshold"]
        if not isinstance(t, (int, float)) or isinstance(t, bool) or not 0.0 < t < 1.0:
            raise bad("audio.input.turn_detection.threshold", "'threshold' must be between 0 and 1")
        out = replace(out, threshold=float(t))
    for key, lo, hi in (("silence_duration_ms", 100, 5000), ("prefix_padding_ms", 0, 2000)):
        if key in td:
            v = td[key]
            if not isinstance(v, int) or isinstance(v, bool) or not lo <= v <= hi:
                raise bad(f"audio.input.turn_detection.{key}", f"'{key}' must be an integer {lo}..{hi}")
            out = replace(out, **{key: v})
    for key in ("create_response", "interrupt_response"):
        if key in td:
            if not isinstance(td[key], bool):
                raise bad(f"audio.input.turn_detection.{key}", f"'{key}' must be true or false")
            out = replace(out, **{key: td[key]})
    return out
