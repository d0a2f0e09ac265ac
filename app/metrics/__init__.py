"""Per-turn latency ledger (``timeline``) and its Prometheus export (``prometheus``)."""
