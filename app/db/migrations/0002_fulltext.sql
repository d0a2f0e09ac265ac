-- Full-text search beside the vectors (hybrid retrieval, app/rag/store.py): each chunk's title (weight A) and
-- body (weight B) as an English tsvector, kept up to date by PostgreSQL itself, with a GIN index.
ALTER TABLE chunks ADD COLUMN tsv tsvector GENERATED ALWAYS AS (
    setweight(to_tsvector('english', title), 'A') || setweight(to_tsvector('english', content), 'B')
) STORED;

CREATE INDEX chunks_tsv_gin ON chunks USING gin (tsv);
