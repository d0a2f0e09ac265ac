"""The fleet's topology on one machine (docs/DEPLOY.md): a vLLM OpenAI-compatible server, one PostgreSQL, app
replicas on the ``remote-vllm`` profile and HAProxy in front, each a real process. ``scripts/fleet.py`` runs it;
``tests/fleet/`` tests it. Nothing of this runs inside ``serve``."""

from sub250.fleet.local import LocalFleet, Replica

__all__ = ["LocalFleet", "Replica"]
