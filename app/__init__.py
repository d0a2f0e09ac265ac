"""sub250: a self-hosted realtime voice assistant server with a measured sub-250 ms TTFT per turn.

Find a pipeline stage by its name: ``app.audio`` (VAD), ``app.asr``, ``app.rag`` (embedder, pgvector
store, ingestion), ``app.llm``, ``app.tts``, ``app.metrics``; ``app.db`` runs PostgreSQL; ``app.modelstore``
resolves model files; ``sub250.cli`` is the command line.
"""

__version__ = "0.1.0"
