-- API hardening: tenants, API keys, idempotency keys and a shared rate limit.

-- Every task belongs to one tenant; the API shows a tenant only its own tasks. Existing rows (and every row
-- written while authentication is disabled) belong to 'default'.
ALTER TABLE tasks ADD COLUMN tenant text NOT NULL DEFAULT 'default';
-- A tenant's list, newest first (the API always filters by tenant).
CREATE INDEX tasks_tenant_created_idx ON tasks (tenant, created_at DESC, id DESC);

-- API keys. A client holds "tyk_<8 hex>_<secret>"; only the public id and the SHA-256 of the secret are
-- stored. A plain fast hash is enough here (no bcrypt/argon2): the secret is 32 random bytes, so there is
-- no dictionary to try and brute force of 256 bits is hopeless however fast each guess is; a slow hash
-- would only add latency to every request. Lookup is by id (primary key), then a constant-time compare.
CREATE TABLE api_keys (
    id          text PRIMARY KEY CHECK (id ~ '^tyk_[0-9a-f]{8}$'),
    tenant      text NOT NULL,
    role        text NOT NULL CHECK (role IN ('submitter', 'reader', 'admin')),
    name        text NOT NULL DEFAULT '',
    key_hash    text NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT clock_timestamp(),
    -- Set once; a revoked key is refused from the very next request (the API never caches keys).
    revoked_at  timestamptz
);
CREATE INDEX api_keys_tenant_idx ON api_keys (tenant, created_at);

-- Idempotency-Key of POST /v1/tasks, per tenant. The row is inserted in the same transaction as its task,
-- so a concurrent duplicate waits on the primary key and then sees the committed row. Deleting the task
-- (a submission whose publish failed is discarded) releases the key with it. The foreign key is checked at
-- commit, because the key row is written first: a duplicate must stop before any task row is written.
CREATE TABLE idempotency_keys (
    tenant       text NOT NULL,
    key          text NOT NULL,
    -- SHA-256 of the canonical JSON of the validated submission: a reused key with another body is refused.
    request_hash text NOT NULL,
    task_id      uuid REFERENCES tasks (id) ON DELETE CASCADE DEFERRABLE INITIALLY DEFERRED,
    created_at   timestamptz NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (tenant, key)
);
CREATE INDEX idempotency_keys_created_idx ON idempotency_keys (created_at);
CREATE INDEX idempotency_keys_task_idx ON idempotency_keys (task_id);

-- One token bucket per tenant, shared by every API replica: refilled by elapsed time and taken from in a
-- single statement per request.
CREATE TABLE rate_limits (
    tenant     text PRIMARY KEY,
    tokens     double precision NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT clock_timestamp()
);
