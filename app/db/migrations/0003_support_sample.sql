-- The example support tools' data (scripts/support_agent.py, issue #14): sample orders, warranty claims and
-- hand-offs to a person, in their own schema so they never mix with the knowledge base. Made-up rows
-- (the order numbers of tests/data/tools/requests.jsonl); a real deployment points its tools at its own tables.
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

INSERT INTO support.orders (order_number, customer, item, status, carrier, ordered_on, estimated_delivery) VALUES
    ('48213', 'Maya Lindqvist', 'Aero 2 air purifier', 'shipped', 'DHL', '2026-11-26', '2026-12-03'),
    ('55102', 'Tomas Berg', 'Aero 2 air purifier', 'delivered', 'UPS', '2026-11-02', '2026-11-06'),
    ('77001', 'Priya Natarajan', 'Aero replacement filter, two-pack', 'processing', NULL, '2026-11-30', '2026-12-05'),
    ('90210', 'Jonas Weber', 'Aero Mini air purifier', 'shipped', 'DPD', '2026-11-27', '2026-12-02'),
    ('31337', 'Ana Sousa', 'Aero 2 air purifier', 'delivered', 'DHL', '2026-10-14', '2026-10-18'),
    ('62048', 'Lea Fischer', 'Aero replacement filter', 'shipped', 'UPS', '2026-11-28', '2026-12-04'),
    ('10457', 'Sam Okafor', 'Aero Mini air purifier', 'delivered', 'DPD', '2026-09-21', '2026-09-25'),
    ('88231', 'Noor Haddad', 'Aero 2 air purifier', 'processing', NULL, '2026-12-01', '2026-12-08'),
    ('40400', 'Elena Rossi', 'Aero wall mount', 'cancelled', NULL, '2026-11-20', NULL),
    ('12345', 'Kai Tanaka', 'Aero 2 air purifier', 'shipped', 'GLS', '2026-11-29', '2026-12-04');
