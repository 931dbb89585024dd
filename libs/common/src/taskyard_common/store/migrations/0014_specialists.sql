-- The specialist catalog of installs without Kubernetes (TASKYARD_CATALOG_SOURCE=database): one row per
-- specialist, its catalog entry as JSON; changed by PUT/DELETE /v1/specialists/{name}.
-- catalog_state.version grows with every change, in the change's own transaction: each service polls it
-- and reads the catalog again when it moved. version 0: never seeded (the first service seeds it from its
-- catalog file).
CREATE TABLE catalog_state (
    singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    version bigint NOT NULL DEFAULT 0,
    fallback text
);
INSERT INTO catalog_state DEFAULT VALUES;

CREATE TABLE specialists (
    name text PRIMARY KEY,
    -- The catalog's order (the routing prompt lists specialists in it): seeded in the file's, new ones last.
    position bigint GENERATED ALWAYS AS IDENTITY,
    spec jsonb NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT clock_timestamp()
);
