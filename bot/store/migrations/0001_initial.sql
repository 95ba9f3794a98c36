-- The first schema of the postgres backend. Documents are `json`, not `jsonb`: json keeps the
-- text as written and accepts "\u0000" (tool output may hold NUL characters; jsonb refuses it).

-- Fencing tokens: every claim of any task takes the next one.
CREATE SEQUENCE lease_tokens;

-- One row per task; a row with no state is a lease taken on a task not saved yet.
CREATE TABLE tasks (
    key           text PRIMARY KEY,
    status        text,
    state         json,
    lease_owner   text,
    lease_token   bigint,
    lease_expires timestamptz,
    updated_at    timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX tasks_status ON tasks (status);

-- Conversations: run 0 is the current run's; an archived run keeps its number.
CREATE TABLE conversation (
    id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    key        text NOT NULL,
    run        integer NOT NULL,
    entry      json NOT NULL,
    written_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX conversation_key_run ON conversation (key, run, id);

-- The changeset of a finished run (the files backend's changes.run<N>.json).
CREATE TABLE changesets (
    key        text NOT NULL,
    run        integer NOT NULL,
    changes    json NOT NULL,
    written_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (key, run)
);

-- Work handed out to any daemon (`take`); the task state stays the truth.
CREATE TABLE jobs (
    key       text PRIMARY KEY,
    fresh     boolean NOT NULL,
    queued_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX jobs_queued_at ON jobs (queued_at);

-- Roles one daemon at a time holds (discovery of a source), until `expires`.
CREATE TABLE leaders (
    role    text PRIMARY KEY,
    holder  text NOT NULL,
    expires timestamptz NOT NULL
);

-- Webhook deliveries acted on (bounded: the newest 10,000 of the last 30 days).
CREATE TABLE deliveries (
    id      text PRIMARY KEY,
    seen_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX deliveries_seen_at ON deliveries (seen_at);
