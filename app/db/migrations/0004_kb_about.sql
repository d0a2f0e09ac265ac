-- Who the assistant speaks for and what it helps with (app/rag/about.py): the knowledge base folder's
-- about.toml, stored by `sub250 ingest` beside its passages. One row at most.
CREATE TABLE kb_about (
    only_row boolean PRIMARY KEY DEFAULT true CHECK (only_row),
    company text NOT NULL,
    scope text NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now()
);
