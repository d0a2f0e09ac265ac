"""Phone calls: Twilio Media Streams (``twilio_routes``, ``twilio_call``), SIP on PJSIP (``sip_agent``, ``sip_pj``,
``sip_call``), and what every call shares (``phone_call``: its session, keys gathered by ``keypad``, ledger, end)."""
