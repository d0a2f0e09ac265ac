"""Retrieval: the query embedder, the pgvector store, and knowledge-base ingestion."""
