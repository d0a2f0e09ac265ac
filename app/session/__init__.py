"""One conversation: a small conductor (``session.py``) over parts that never call back into it.

``input_buffer`` (caller audio in windows), ``listening`` (partials, retrieval ahead), ``speculation`` (the
reply held at the first pause), ``conversation`` (typed items), ``reply`` (one reply's state machine) over
``stages`` (ASR, retrieval, prompt, generation, speech), ``output`` (the transport as the session sees it).
Wire shapes are built in :mod:`app.protocol`; transports hand the session parsed events and PCM.
"""

from sub250.session.output import Transport
from sub250.session.session import RealtimeSession

__all__ = ["RealtimeSession", "Transport"]
