-- Where discovery has read an inbox up to (GitHub notifications: `since`, `Last-Modified` and
-- the `X-Poll-Interval` hold), one row per source; written by the daemon that leads discovery.
CREATE TABLE discovery_cursors (
    name       text PRIMARY KEY,
    value      text NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now()
);
