"""The one exception of the protocol layer."""

from __future__ import annotations


class ProtocolError(Exception):
    """A client mistake; the session answers with an ``error`` event and carries on.

    ``message`` is always text written by us (never an exception's ``str()``), short and bounded: where it
    quotes the client's value, the quote is cut (see ``app.protocol.fields.show``).
    """

    def __init__(self, code: str, message: str, *, param: str | None = None, event_id: str | None = None,
                 type: str = "invalid_request_error") -> None:
        super().__init__(message)
        self.code, self.message, self.param, self.event_id, self.type = code, message, param, event_id, type
