"""Every server event and item shape the session sends, built in one place (sans-I/O).

The session speaks in terms of its own objects (a conversation item, a reply's ids, a transcript); these
functions turn them into the OpenAI Realtime GA wire shapes, plus our ``sub250.*`` additions. Nothing here
knows of sockets, tasks or models.
"""

from __future__ import annotations

from typing import Any, Literal

from sub250.protocol.client_events import Role
from sub250.protocol.events import ProtocolError, encode_audio, error_event, server_event
from sub250.protocol.session_config import SessionConfig

#: The content part a message carries: caller audio (with its transcript), typed text, or the reply.
PartType = Literal["input_audio", "input_text", "output_audio", "output_text"]


# --- items -------------------------------------------------------------------------------------------

def content_part(part_type: PartType, text: str | None) -> dict[str, Any]:
    """One content part: audio parts carry a ``transcript``, text parts a ``text``."""
    key = "transcript" if part_type in ("input_audio", "output_audio") else "text"
    return {"type": part_type, key: text}


def message_item(item_id: str, role: Role, status: str, parts: list[dict[str, Any]]) -> dict[str, Any]:
    """A ``realtime.item`` of type ``message``."""
    return {"id": item_id, "type": "message", "object": "realtime.item", "role": role, "status": status,
            "content": parts}


def function_call_item(item_id: str, status: str, call_id: str, name: str, arguments: str) -> dict[str, Any]:
    """A ``realtime.item`` of type ``function_call``: the model asks the client to run a tool."""
    return {"id": item_id, "type": "function_call", "object": "realtime.item", "status": status,
            "call_id": call_id, "name": name, "arguments": arguments}


def function_call_output_item(item_id: str, call_id: str, output: str) -> dict[str, Any]:
    """A ``realtime.item`` of type ``function_call_output``: the client's result of a tool call."""
    return {"id": item_id, "type": "function_call_output", "object": "realtime.item", "status": "completed",
            "call_id": call_id, "output": output}


# --- session -----------------------------------------------------------------------------------------

def session_created(config: SessionConfig) -> dict[str, Any]:
    return server_event("session.created", session=config.to_wire())


def session_updated(config: SessionConfig) -> dict[str, Any]:
    return server_event("session.updated", session=config.to_wire())


def error(err: ProtocolError) -> dict[str, Any]:
    return error_event(err)


# --- input audio buffer ------------------------------------------------------------------------------

def speech_started(item_id: str, audio_start_ms: int) -> dict[str, Any]:
    return server_event("input_audio_buffer.speech_started", audio_start_ms=audio_start_ms, item_id=item_id)


def speech_stopped(item_id: str, audio_end_ms: int) -> dict[str, Any]:
    return server_event("input_audio_buffer.speech_stopped", audio_end_ms=audio_end_ms, item_id=item_id)


def buffer_committed(item_id: str, previous_item_id: str | None) -> dict[str, Any]:
    return server_event("input_audio_buffer.committed", previous_item_id=previous_item_id, item_id=item_id)


def timeout_triggered(item_id: str, audio_start_ms: int, audio_end_ms: int) -> dict[str, Any]:
    """The caller said nothing for ``idle_timeout_ms`` after a response: a response comes (the nudge)."""
    return server_event("input_audio_buffer.timeout_triggered", audio_start_ms=audio_start_ms,
                        audio_end_ms=audio_end_ms, item_id=item_id)


def buffer_cleared() -> dict[str, Any]:
    return server_event("input_audio_buffer.cleared")


def dtmf_received(digit: str, received_at: int) -> dict[str, Any]:
    """A key pressed on a phone (GA, SIP calls): ``event`` is the key, ``received_at`` Unix seconds."""
    return server_event("input_audio_buffer.dtmf_event_received", event=digit, received_at=received_at)


# --- conversation ------------------------------------------------------------------------------------

def item_added(item: dict[str, Any], previous_item_id: str | None) -> dict[str, Any]:
    return server_event("conversation.item.added", previous_item_id=previous_item_id, item=item)


def item_done(item: dict[str, Any], previous_item_id: str | None = None) -> dict[str, Any]:
    if previous_item_id is None:
        return server_event("conversation.item.done", item=item)
    return server_event("conversation.item.done", previous_item_id=previous_item_id, item=item)


def item_retrieved(item: dict[str, Any]) -> dict[str, Any]:
    return server_event("conversation.item.retrieved", item=item)


def item_deleted(item_id: str) -> dict[str, Any]:
    return server_event("conversation.item.deleted", item_id=item_id)


def item_truncated(item_id: str, content_index: int, audio_end_ms: int) -> dict[str, Any]:
    return server_event("conversation.item.truncated", item_id=item_id, content_index=content_index,
                        audio_end_ms=audio_end_ms)


def transcription_completed(item_id: str, transcript: str, audio_seconds: float) -> dict[str, Any]:
    return server_event("conversation.item.input_audio_transcription.completed", item_id=item_id,
                        content_index=0, transcript=transcript,
                        usage={"type": "duration", "seconds": audio_seconds})


def transcription_delta(item_id: str, delta: str) -> dict[str, Any]:
    return server_event("conversation.item.input_audio_transcription.delta", item_id=item_id, content_index=0,
                        delta=delta)


def transcription_failed(item_id: str, message: str) -> dict[str, Any]:
    """The caller's audio could not be transcribed (``message``: ours, with an error id; never the exception's)."""
    return server_event("conversation.item.input_audio_transcription.failed", item_id=item_id, content_index=0,
                        error={"type": "server_error", "code": "transcription_failed", "message": message,
                               "param": None})


def transcript_done(item: dict[str, Any], transcript: str, audio_seconds: float) -> list[dict[str, Any]]:
    """A caller's audio item is transcribed: ``input_audio_transcription.delta`` (the final transcript is
    whole at once: the partials while the caller spoke are ``sub250.transcript.partial``), ``.completed``,
    then ``item.done``."""
    return [transcription_delta(item["id"], transcript), transcription_completed(item["id"], transcript, audio_seconds),
            item_done(item)]


def transcript_partial(item_id: str, text: str, audio_ms: int) -> dict[str, Any]:
    """sub250 addition: the transcript of the speech so far, while the caller speaks."""
    return server_event("sub250.transcript.partial", item_id=item_id, text=text, audio_ms=audio_ms)


# --- responses ---------------------------------------------------------------------------------------

def response_object(response_id: str, conversation_id: str, status: str, *,
                    output_modalities: list[str] | None = None, output: list[dict[str, Any]] | None = None,
                    status_details: dict[str, Any] | None = None, output_tokens: int | None = None,
                    metadata: dict[str, str] | None = None) -> dict[str, Any]:
    obj: dict[str, Any] = {"id": response_id, "object": "realtime.response", "status": status,
                           "output": output or [], "conversation_id": conversation_id, "metadata": metadata}
    if output_modalities is not None:
        obj["output_modalities"] = output_modalities
    if status != "in_progress":
        obj["status_details"] = status_details
    if output_tokens is not None:
        obj["usage"] = {"output_tokens": output_tokens, "total_tokens": output_tokens}
    return obj


def response_created(response: dict[str, Any]) -> dict[str, Any]:
    return server_event("response.created", response=response)


def response_done(response: dict[str, Any]) -> dict[str, Any]:
    return server_event("response.done", response=response)


def rate_limits_updated(limits: list[dict[str, Any]]) -> dict[str, Any]:
    return server_event("rate_limits.updated", rate_limits=limits)


def output_item_added(response_id: str, item: dict[str, Any]) -> dict[str, Any]:
    return server_event("response.output_item.added", response_id=response_id, output_index=0, item=item)


def output_item_done(response_id: str, item: dict[str, Any]) -> dict[str, Any]:
    return server_event("response.output_item.done", response_id=response_id, output_index=0, item=item)


def function_call_arguments_delta(response_id: str, item_id: str, call_id: str, delta: str) -> dict[str, Any]:
    return server_event("response.function_call_arguments.delta", response_id=response_id, item_id=item_id,
                        output_index=0, call_id=call_id, delta=delta)


def function_call_arguments_done(response_id: str, item_id: str, call_id: str, name: str,
                                 arguments: str) -> dict[str, Any]:
    return server_event("response.function_call_arguments.done", response_id=response_id, item_id=item_id,
                        output_index=0, call_id=call_id, name=name, arguments=arguments)


#: The content part events of a response name their part ``text`` / ``audio`` (the item's content says
#: ``output_text`` / ``output_audio``): the GA models of ``response.content_part.*``.
_RESPONSE_PART_TYPES = {"output_text": "text", "output_audio": "audio"}


def _response_part(part: dict[str, Any]) -> dict[str, Any]:
    return {**part, "type": _RESPONSE_PART_TYPES.get(part["type"], part["type"])}


def content_part_added(response_id: str, item_id: str, part: dict[str, Any]) -> dict[str, Any]:
    return server_event("response.content_part.added", response_id=response_id, item_id=item_id, output_index=0,
                        content_index=0, part=_response_part(part))


def content_part_done(response_id: str, item_id: str, part: dict[str, Any]) -> dict[str, Any]:
    return server_event("response.content_part.done", response_id=response_id, item_id=item_id, output_index=0,
                        content_index=0, part=_response_part(part))


def text_delta(response_id: str, item_id: str, delta: str, *, audio: bool) -> dict[str, Any]:
    """The reply's text as it streams: the transcript of its audio, or plain text for a text-only reply."""
    etype = "response.output_audio_transcript.delta" if audio else "response.output_text.delta"
    return server_event(etype, response_id=response_id, item_id=item_id, output_index=0, content_index=0,
                        delta=delta)


def audio_delta(response_id: str, item_id: str, pcm16: bytes | memoryview) -> dict[str, Any]:
    """Reply audio, PCM16 mono 24 kHz, base64 in the event (the WebSocket transport's encoding)."""
    return server_event("response.output_audio.delta", response_id=response_id, item_id=item_id, output_index=0,
                        content_index=0, delta=encode_audio(pcm16))


def content_done(response_id: str, item_id: str, text: str, *, audio: bool) -> list[dict[str, Any]]:
    """The events that close a completed reply's content: ``output_audio.done`` + ``output_audio_transcript.done``,
    or ``output_text.done``."""
    ids = {"response_id": response_id, "item_id": item_id, "output_index": 0, "content_index": 0}
    if audio:
        return [server_event("response.output_audio.done", **ids),
                server_event("response.output_audio_transcript.done", **ids, transcript=text)]
    return [server_event("response.output_text.done", **ids, text=text)]


# --- sub250 additions --------------------------------------------------------------------------------

def sources(response_id: str, item_id: str, passages: list[dict[str, Any]]) -> dict[str, Any]:
    return server_event("sub250.sources", response_id=response_id, item_id=item_id, sources=passages)


def reply_paused(response_id: str, audio_start_ms: int) -> dict[str, Any]:
    """sub250 addition: sound over the reply, being checked for words; the reply is paused (a client that plays
    the audio itself may duck it now)."""
    return server_event("sub250.reply.paused", response_id=response_id, audio_start_ms=audio_start_ms)


def reply_resumed(response_id: str) -> dict[str, Any]:
    """sub250 addition: the sound had no words (yet): the reply plays on from where it paused."""
    return server_event("sub250.reply.resumed", response_id=response_id)


def turn_latency(response_id: str, report: dict[str, Any]) -> dict[str, Any]:
    return server_event("sub250.turn.latency", response_id=response_id, **report)


__all__ = [name for name in dir() if not name.startswith("_") and name not in (
    "annotations", "Any", "Literal", "ProtocolError", "SessionConfig", "encode_audio", "error_event", "new_id",
    "server_event")]
