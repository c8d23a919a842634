-- The connection pool's own statements (`_pool.py`, ADR 0012).

-- name: learn_array_codecs
-- One NULL of each array type in ARRAY_TYPES: asyncpg introspects them once, here, in
-- the pool's init, instead of on a request's first statement that binds one. Only
-- built-in types, so it works before the schema is migrated.
SELECT NULL::int2[], NULL::int4[], NULL::int8[], NULL::float8[], NULL::bool[], NULL::bytea[], NULL::text[]

-- name: rollback
-- A returned connection needs no more reset than this (`light_reset`).
ROLLBACK
