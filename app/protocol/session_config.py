"""The session object of ``session.update`` / ``session.created``: typed, with defaults, validated."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from sub250.audio import formats
from sub250.audio.formats import AudioFormat
from sub250.audio.rates import INPUT_RATE
from sub250.protocol import extensions
from sub250.protocol import fields as f
from sub250.protocol import tools as t
from sub250.rag.about import About

#: The only ``audio/pcm`` rate on the wire (input and output are both 24 kHz; kept for importers).
AUDIO_RATE = INPUT_RATE
#: The instructions of a session whose server's knowledge base names no company (app/rag/about.py; the
#: server's sessions start with its own: ``PipelineTuning.instructions``).
DEFAULT_INSTRUCTIONS = About().instructions


@dataclass(frozen=True)
class TurnDetection:
    """Server turn detection (``turn_detection``; ``None`` means the client commits): ``server_vad`` ends the
    turn after ``silence_duration_ms`` of silence; ``semantic_vad`` asks the end-of-turn model at each pause
    and waits as long as ``eagerness`` says (``app/session/turn_detection.py``)."""

    type: str = "server_vad"
    #: ``semantic_vad`` only: ``low`` (let the caller finish), ``medium``, ``high`` (answer soon), ``auto``.
    eagerness: str = "auto"
    threshold: float = 0.5
    #: Silence after speech that ends the turn.
    silence_duration_ms: int = 500
    #: Audio kept before the detected speech start.
    prefix_padding_ms: int = 300
    create_response: bool = True
    interrupt_response: bool = True
    #: After a response's audio has played, this long without the caller speaking triggers a response
    #: (``input_audio_buffer.timeout_triggered``); None: never.
    idle_timeout_ms: int | None = None

    def to_wire(self) -> dict[str, Any]:
        if self.type == "semantic_vad":
            return {"type": "semantic_vad", "eagerness": self.eagerness, "create_response": self.create_response,
                    "interrupt_response": self.interrupt_response}
        return {"type": "server_vad", "threshold": self.threshold, "silence_duration_ms": self.silence_duration_ms,
                "prefix_padding_ms": self.prefix_padding_ms, "create_response": self.create_response,
                "interrupt_response": self.interrupt_response, "idle_timeout_ms": self.idle_timeout_ms}


#: ``session.type``: a conversation with replies, or transcription only (no responses).
SESSION_TYPES = ("realtime", "transcription")


@dataclass(frozen=True)
class SessionConfig:
    id: str = ""
    #: ``realtime`` or ``transcription`` (the caller's audio is transcribed; nothing replies).
    kind: str = "realtime"
    model: str = "sub250"
    instructions: str = DEFAULT_INSTRUCTIONS
    output_modalities: tuple[str, ...] = ("audio",)
    turn_detection: TurnDetection | None = field(default_factory=TurnDetection)
    max_output_tokens: int = 96
    voice: str = "joe"
    transcription: bool = True
    #: ``audio.input.transcription.prompt``: text that primes the recognizer (names, terms); None: the
    #: profile's (``[asr] prompt``); "": none.
    transcription_prompt: str | None = None
    #: sub250 extension (``session.sub250.speculative_turns``): prepare the reply at the first pause, before
    #: the turn is committed. None: the profile's choice (``[vad] speculate_after_ms``).
    speculative_turns: bool | None = None
    #: sub250 extension (``session.sub250.interruption_check``): check speech over a live reply for words before
    #: it cancels the reply (app/session/interruption.py). None: the profile's choice (``[interruption] enabled``).
    interruption_check: bool | None = None
    #: sub250 extension (``session.sub250.grounding``): True (the default) answers by the profile's ``[answer]``
    #: policy - the out-of-scope gate and the grounded extract - whatever the instructions; False turns them off
    #: explicitly: the LLM answers freely from the retrieved passages.
    grounding: bool = True
    #: sub250 extension (``session.sub250.keypad_tool``): on a phone call, the function tool that what the caller
    #: keys in calls (``tool_choice`` forced for that response: the model writes only its arguments, from the
    #: digits); "" (the default): the model decides, as for words. A name not among ``tools`` is refused.
    keypad_tool: str = ""
    #: Function tools the model may call, and how (``tool_choice``).
    tools: tuple[t.FunctionTool, ...] = ()
    tool_choice: t.ToolChoice = t.AUTO
    #: ``include``: optional output the client asked for - our ``sub250.*`` events among it
    #: (app/protocol/extensions.py); a session that names none gets the GA API's events only.
    include: tuple[str, ...] = ()
    #: ``audio.input.format`` / ``audio.output.format``: PCM16 at 24 kHz, or G.711 at 8 kHz (app/audio/formats.py).
    input_format: AudioFormat = formats.PCM_IN
    output_format: AudioFormat = formats.PCM_OUT

    @property
    def transcription_only(self) -> bool:
        return self.kind == "transcription"

    def to_wire(self) -> dict[str, Any]:
        if self.transcription_only:
            return {"type": "transcription", "object": "realtime.transcription_session", "id": self.id,
                    "audio": {"input": self._audio_input_wire()}, "include": list(self.include)}
        return {
            "type": "realtime",
            "object": "realtime.session",
            "id": self.id,
            "model": self.model,
            "instructions": self.instructions,
            "output_modalities": list(self.output_modalities),
            "max_output_tokens": self.max_output_tokens,
            "tools": [tool.to_wire() for tool in self.tools],
            "tool_choice": self.tool_choice.to_wire(),
            "include": list(self.include),
            "audio": {
                "input": self._audio_input_wire(),
                "output": {"format": self.output_format.to_wire(), "voice": self.voice},
            },
        }

    def _audio_input_wire(self) -> dict[str, Any]:
        return {"format": self.input_format.to_wire(),
                "turn_detection": self.turn_detection.to_wire() if self.turn_detection else None,
                "transcription": self._transcription_wire() if self.transcription or self.transcription_only else None}

    def _transcription_wire(self) -> dict[str, Any]:
        wire: dict[str, Any] = {"model": "whisper"}
        if self.transcription_prompt is not None:
            wire["prompt"] = self.transcription_prompt
        return wire

    def updated(self, session: Any, event_id: str | None = None) -> SessionConfig:
        """Apply a ``session.update`` payload; raise ProtocolError on the first bad field.

        Every field is type-checked, whatever the payload holds (``null`` = not given, except
        ``turn_detection``/``transcription``: off). Fields of the GA API we do not implement (``prompt``,
        ``tracing`` ...) are type-checked and ignored; unknown keys are ignored. ``include`` replaces the
        list before (``[]``: GA events only).
        """
        session = f.obj(session, "session", event_id)
        changes: dict[str, Any] = f.common_options(session, "session.", event_id)
        if session.get("type") is not None:
            if session["type"] not in SESSION_TYPES:
                raise f.invalid("session.type", "'type' must be 'realtime' or 'transcription'", event_id)
            changes["kind"] = session["type"]
        changes.update(t.options(session, "session.", event_id))
        t.check_choice(changes.get("tool_choice", self.tool_choice), changes.get("tools", self.tools),
                       "session.tool_choice", event_id)
        f.checked(session, "session.", event_id, _SESSION_IGNORED)
        if session.get("include") is not None:
            changes["include"] = extensions.include(session["include"], "session.include", event_id)
        ext = session.get("sub250")
        if ext is not None:
            f.obj(ext, "session.sub250", event_id)
            for name in ("speculative_turns", "interruption_check", "grounding"):
                if ext.get(name) is not None:
                    changes[name] = f.boolean(ext[name], f"session.sub250.{name}", event_id)
            if ext.get("keypad_tool") is not None:
                changes["keypad_tool"] = _keypad_tool(ext["keypad_tool"], changes.get("tools", self.tools), event_id)
        audio = session.get("audio")
        if audio is not None:
            f.obj(audio, "session.audio", event_id)
            inp = audio.get("input")
            if inp is not None:
                changes.update(_audio_input(f.obj(inp, "session.audio.input", event_id), self.turn_detection,
                                            event_id))
            out = audio.get("output")
            if out is not None:
                changes.update(_audio_output(f.obj(out, "session.audio.output", event_id), event_id))
        return replace(self, **changes) if changes else self


def _keypad_tool(value: Any, tools: tuple[t.FunctionTool, ...], event_id: str | None) -> str:
    name = f.any_string(value, "session.sub250.keypad_tool", event_id)
    if name and name not in {tool.name for tool in tools}:
        raise f.invalid("session.sub250.keypad_tool", f"'keypad_tool' names {name!r}, which is not among the tools",
                        event_id)
    return name


def _audio_format(fmt: Any, param: str, pcm: AudioFormat, event_id: str | None) -> AudioFormat | None:
    """``{"type": "audio/pcm", "rate": 24000}`` (the rate may be left out), ``{"type": "audio/pcmu"}`` or
    ``{"type": "audio/pcma"}`` (8 kHz); ``None``: unchanged. Anything else: ``unsupported_audio_format``."""
    if fmt is None:
        return None
    kind = fmt.get("type") if isinstance(fmt, dict) else None
    chosen = pcm if kind == pcm.type else formats.G711.get(kind) if isinstance(kind, str) else None
    if chosen is None:
        raise f.invalid(f"{param}.type", "must be 'audio/pcm' (PCM16 mono, 24 kHz), 'audio/pcmu' or 'audio/pcma' "
                                         "(G.711, 8 kHz)", event_id, "unsupported_audio_format")
    rate = fmt.get("rate", chosen.rate)
    if not isinstance(rate, (int, float)) or isinstance(rate, bool) or rate != chosen.rate:
        raise f.invalid(f"{param}.rate", f"{chosen.type} must be {chosen.rate} Hz (got {f.show(rate)}); resample "
                                         "on the client", event_id, "unsupported_audio_format")
    return chosen


#: ``audio.input.transcription`` fields checked (and, but for ``prompt``, ignored: the server has one recognizer).
_TRANSCRIPTION: dict[str, f.Check] = {
    "model": f.name, "language": f.name, "prompt": f.any_string,
    "languages": lambda v, p, e: f.array(v, p, e, of=f.name),
    "keywords": lambda v, p, e: f.array(v, p, e, of=f.any_string),
    "delay": f.name,
}


def _audio_input(inp: dict[str, Any], current: TurnDetection | None, event_id: str | None) -> dict[str, Any]:
    changes: dict[str, Any] = {}
    fmt = _audio_format(inp.get("format"), "session.audio.input.format", formats.PCM_IN, event_id)
    if fmt is not None:
        changes["input_format"] = fmt
    if inp.get("noise_reduction") is not None:
        f.obj(inp["noise_reduction"], "session.audio.input.noise_reduction", event_id)
    if "turn_detection" in inp:
        changes["turn_detection"] = _turn_detection(inp["turn_detection"], current, event_id)
    if "transcription" in inp:
        tr = inp["transcription"]
        if tr is not None:
            f.checked(f.obj(tr, "session.audio.input.transcription", event_id),
                      "session.audio.input.transcription.", event_id, _TRANSCRIPTION)
            if "prompt" in tr:
                changes["transcription_prompt"] = tr["prompt"]
        changes["transcription"] = tr is not None
    return changes


def _voice(value: Any, param: str, event_id: str | None) -> str:
    """A voice name, or the API's ``{"id": "voice_..."}`` (custom voice) object."""
    if isinstance(value, dict):
        return f.name(value.get("id"), f"{param}.id", event_id)
    return f.name(value, param, event_id)


def _audio_output(out: dict[str, Any], event_id: str | None) -> dict[str, Any]:
    changes: dict[str, Any] = {}
    fmt = _audio_format(out.get("format"), "session.audio.output.format", formats.PCM_OUT, event_id)
    if fmt is not None:
        changes["output_format"] = fmt
    if out.get("speed") is not None:
        f.number(out["speed"], "session.audio.output.speed", event_id, 0.25, 1.5)
    if out.get("voice") is not None:
        changes["voice"] = _voice(out["voice"], "session.audio.output.voice", event_id)
    return changes


#: GA ``session`` fields accepted and ignored, after a type check (the shared ones are in fields.common_options).
_SESSION_IGNORED: dict[str, f.Check] = {
    "model": f.name,
    "tracing": f.string_or_object,
    "truncation": f.string_or_object,
}


TURN_DETECTION_TYPES = ("server_vad", "semantic_vad")
EAGERNESS_LEVELS = ("low", "medium", "high", "auto")


def _turn_detection(td: Any, current: TurnDetection | None, event_id: str | None) -> TurnDetection | None:
    if td is None:
        return None
    where = "session.audio.input.turn_detection"
    f.obj(td, where, event_id)
    kind = td.get("type")
    if kind is not None and kind not in TURN_DETECTION_TYPES:
        raise f.invalid(f"{where}.type", "'type' must be 'server_vad' or 'semantic_vad'", event_id)
    out = current or TurnDetection()
    if kind is not None:
        out = replace(out, type=kind)
    if td.get("eagerness") is not None:
        if td["eagerness"] not in EAGERNESS_LEVELS:
            raise f.invalid(f"{where}.eagerness", "'eagerness' must be 'low', 'medium', 'high' or 'auto'", event_id)
        out = replace(out, eagerness=td["eagerness"])
    if td.get("threshold") is not None:
        out = replace(out, threshold=f.number(td["threshold"], f"{where}.threshold", event_id, 0.0, 1.0,
                                              open_range=True))
    changes: dict[str, Any] = {}
    for key, lo, hi in (("silence_duration_ms", 100, 5000), ("prefix_padding_ms", 0, 2000)):
        if td.get(key) is not None:
            changes[key] = f.integer(td[key], f"{where}.{key}", event_id, lo, hi)
    for key in ("create_response", "interrupt_response"):
        if td.get(key) is not None:
            changes[key] = f.boolean(td[key], f"{where}.{key}", event_id)
    out = replace(out, **changes)
    if "idle_timeout_ms" in td:  # null turns it off
        value = td["idle_timeout_ms"]
        out = replace(out, idle_timeout_ms=None if value is None else
                      f.integer(value, f"{where}.idle_timeout_ms", event_id, 5000, 30000))
    return out
