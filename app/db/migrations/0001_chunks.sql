-- Knowledge-base documents and their chunks, with 384-d MiniLM embeddings in an HNSW index.
CREATE EXTENSION IF NOT EXISTS vector;

CREATE TABLE documents (
    id              bigserial PRIMARY KEY,
    source          text NOT NULL UNIQUE,          -- path relative to the ingested folder
    title           text NOT NULL,
    sha256          text NOT NULL,                 -- of the file's bytes: unchanged files are skipped
    embedding_model text NOT NULL,                 -- a model change re-embeds
    ingested_at     timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE chunks (
    id          bigserial PRIMARY KEY,
    document_id bigint NOT NULL REFERENCES documents(id) ON DELETE CASCADE,
    ordinal     integer NOT NULL,
    title       text NOT NULL,
    content     text NOT NULL,
    metadata    jsonb NOT NULL DEFAULT '{}'::jsonb,
    embedding   vector(384) NOT NULL,
    UNIQUE (document_id, ordinal)
);

CREATE INDEX chunks_embedding_hnsw ON chunks
    USING hnsw (embedding vector_cosine_ops) WITH (m = 16, ef_construction = 64);
