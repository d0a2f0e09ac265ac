"""Benchmarks that talk to a server over the public protocol, as a client would (replay, reports)."""
