-- The example support tools' tables (scripts/support_agent.py, issue #14): orders, warranty claims and
-- hand-offs to a person, in their own schema so they never mix with the knowledge base; a real deployment points
-- its tools at its own tables. Its made-up rows are sample data of a fresh install only (app/db/sample.py: loaded
-- with the sample knowledge base into a database that holds no documents); databases made before that got them here.
CREATE SCHEMA support;

CREATE TABLE support.orders (
    order_number text PRIMARY KEY CHECK (order_number ~ '^[0-9]{4,8}$'),
    customer text NOT NULL,
    item text NOT NULL,
    status text NOT NULL CHECK (status IN ('processing', 'shipped', 'delivered', 'cancelled')),
    carrier text,
    ordered_on date NOT NULL,
    estimated_delivery date
);

CREATE TABLE support.warranty_claims (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    order_number text NOT NULL REFERENCES support.orders (order_number),
    problem text NOT NULL CHECK (length(problem) BETWEEN 1 AND 2000),
    status text NOT NULL DEFAULT 'open' CHECK (status IN ('open', 'approved', 'rejected', 'closed')),
    opened_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE support.handoffs (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    reason text NOT NULL CHECK (length(reason) BETWEEN 1 AND 2000),
    queue text NOT NULL DEFAULT 'support',
    requested_at timestamptz NOT NULL DEFAULT now()
);
