-- The shared download queue: sessions, slot leases with fencing tokens, fleet state.
--
-- Everything lives in the schema the runner creates (default "arkvory"), which holds
-- only queue state that rebuilds itself within minutes: exclude it from backups
-- (pg_dump --exclude-schema=arkvory). See docs/adr/0010-postgresql-leases.md.

-- Fencing tokens: every grant of a slot gets a new, ever larger token.
CREATE SEQUENCE lease_token_seq;
-- Arrival order among sessions with the same arrival time (R-TICKET-2).
CREATE SEQUENCE session_seq;

-- One row per slot. A session is active exactly when it is the session_key of a slot
-- row, and a claim may only take a row with slot_no < sessions: the number of active
-- sessions can never exceed the number of slot rows claimable under the limit, however
-- many processes claim at once (R-PG-2). UNIQUE(session_key): one slot per session.
CREATE TABLE download_slot (
    slot_no          integer PRIMARY KEY CHECK (slot_no >= 0),
    session_key      bytea UNIQUE,
    lease_token      bigint NOT NULL DEFAULT 0,
    holder_node      text,
    lease_expires_at timestamptz,
    claimed_at       timestamptz,
    CHECK ((session_key IS NULL) = (lease_expires_at IS NULL))
);
CREATE INDEX download_slot_free ON download_slot (slot_no) WHERE session_key IS NULL;
CREATE INDEX download_slot_expiry ON download_slot (lease_expires_at)
    WHERE session_key IS NOT NULL;

-- Download sessions. Times in double precision columns are fleet time in seconds
-- (the nodes' clocks); lease times are timestamptz from the database clock.
-- state: 0 waiting, 1 active (holds a slot), 2 paused (slot released, place kept).
CREATE TABLE download_session (
    session_key     bytea PRIMARY KEY,
    principal       text NOT NULL,
    base_class      smallint NOT NULL CHECK (base_class BETWEEN 0 AND 3),
    queue_rank      smallint NOT NULL CHECK (queue_rank BETWEEN 0 AND 3),
    has_id          boolean NOT NULL,
    object_size     bigint NOT NULL CHECK (object_size >= 0),
    state           smallint NOT NULL CHECK (state BETWEEN 0 AND 2),
    arrival         double precision NOT NULL,
    arrival_wall_ms bigint NOT NULL,
    seq             bigint NOT NULL DEFAULT nextval('session_seq'),
    order_key       double precision NOT NULL DEFAULT 0,
    aging_since     double precision NOT NULL,
    promote_at      double precision,
    waiting_since   double precision NOT NULL,
    check_at        double precision NOT NULL,
    no_show_at      double precision NOT NULL,
    marked          boolean NOT NULL DEFAULT false,
    mark_backup     boolean NOT NULL DEFAULT false,
    first_estimate  double precision,
    slot_since      double precision,
    last_activity   double precision NOT NULL,
    interrupted     boolean NOT NULL DEFAULT false,
    paused_until    double precision,
    start_offset    bigint,
    delivered       int8multirange NOT NULL DEFAULT '{}',
    -- Preemption (R-PREEMPT): an active protocol client asked to yield at its next
    -- range boundary, and a yielder that waits again behind the head it yielded to.
    yield_requested boolean NOT NULL DEFAULT false,
    blocked_by      bytea
);
CREATE INDEX download_session_queue
    ON download_session (queue_rank, order_key, arrival, seq) WHERE state = 0;
CREATE INDEX download_session_active ON download_session (session_key) WHERE state = 1;
CREATE INDEX download_session_marked ON download_session (session_key) WHERE marked;
CREATE INDEX download_session_no_show ON download_session (no_show_at) WHERE state = 0;
CREATE INDEX download_session_aging ON download_session (promote_at)
    WHERE state = 0 AND promote_at IS NOT NULL;
CREATE INDEX download_session_paused ON download_session (paused_until) WHERE state = 2;
CREATE INDEX download_session_principal ON download_session (principal, state);
CREATE INDEX download_session_blocked ON download_session (blocked_by)
    WHERE blocked_by IS NOT NULL;

-- Round-robin between principals within a class: a principal's k-th waiter gets the
-- turn k rounds after the current one (the same rule as the in-memory fair queue).
CREATE TABLE principal_round (
    queue_rank smallint NOT NULL,
    principal  text NOT NULL,
    last_tag   bigint NOT NULL,
    PRIMARY KEY (queue_rank, principal)
);

-- Per class: the current round (virtual time) and the stride pass between classes.
CREATE TABLE class_state (
    queue_rank   smallint PRIMARY KEY CHECK (queue_rank BETWEEN 0 AND 3),
    virtual_time bigint NOT NULL DEFAULT 0,
    pass         double precision NOT NULL DEFAULT 0
);
INSERT INTO class_state (queue_rank) VALUES (0), (1), (2), (3);

-- Fleet-wide counters and what the leader's tick computed for estimates.
CREATE TABLE queue_state (
    id                  boolean PRIMARY KEY DEFAULT true CHECK (id),
    last_release        double precision NOT NULL DEFAULT 0,
    free_at_mark        integer NOT NULL DEFAULT 0,
    finish_table        double precision[] NOT NULL DEFAULT '{}',
    finish_table_at     double precision NOT NULL DEFAULT 0,
    fleet_rate          double precision NOT NULL DEFAULT 0,
    class_lengths       bigint[] NOT NULL DEFAULT '{0,0,0,0}',
    waiting_bytes       double precision NOT NULL DEFAULT 0,
    session_count       bigint NOT NULL DEFAULT 0,
    completed_total     bigint NOT NULL DEFAULT 0,
    no_shows_total      bigint NOT NULL DEFAULT 0,
    idle_releases_total bigint NOT NULL DEFAULT 0,
    reaped_total        bigint NOT NULL DEFAULT 0,
    preemptions_total   bigint NOT NULL DEFAULT 0
);
INSERT INTO queue_state DEFAULT VALUES;

-- Node heartbeats, all on the database clock.
CREATE TABLE fleet_node (
    node_id      text PRIMARY KEY,
    started_at   timestamptz NOT NULL DEFAULT now(),
    heartbeat_at timestamptz NOT NULL DEFAULT now(),
    rate         double precision NOT NULL DEFAULT 0
);

-- The queue-ordering leader: itself a fenced lease (one row).
CREATE TABLE queue_leader (
    id         boolean PRIMARY KEY DEFAULT true CHECK (id),
    node_id    text,
    token      bigint NOT NULL DEFAULT 0,
    expires_at timestamptz
);
INSERT INTO queue_leader DEFAULT VALUES;
