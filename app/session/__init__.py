"""One conversation: a small facade (``session.py``) over parts that return decisions and never call back.

``recognition`` (the caller's side: ``input_buffer``, ``turn_detection``, ``pauses``, ``arbiter``,
``speculation``, ``listening``; the caller's state in ``caller``), ``responses`` (the response slot) over
``reply`` (one reply's state machine) and its ``stages`` (ASR, retrieval, prompt, generation, speech),
``conversation`` (typed items), ``output`` (the transport as the session sees it).
Wire shapes are built in :mod:`app.protocol`; transports hand the session parsed events and PCM.
"""

from sub250.session.output import Transport
from sub250.session.session import RealtimeSession

__all__ = ["RealtimeSession", "Transport"]
