"""Phone calls: Twilio Media Streams (``twilio_routes``, ``twilio_call``), keyed-in digits (``keypad``)."""
