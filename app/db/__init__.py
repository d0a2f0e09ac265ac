"""PostgreSQL + pgvector: the embedded server, versioned migrations, and the asyncpg pool."""
