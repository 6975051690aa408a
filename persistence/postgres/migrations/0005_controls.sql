-- Issue 13: an operator's standing controls (pause, a pending seek), one
-- row per target (a source: unit '', or one unit), read by every node once
-- per renewal round; and the audit of every control (persistence.Controls).
CREATE TABLE drover_controls (
    source       text        NOT NULL,
    unit         text        NOT NULL DEFAULT '',
    paused       boolean     NOT NULL DEFAULT false,
    seek         text        NOT NULL DEFAULT '',
    seek_id      bigint      NOT NULL DEFAULT 0,
    seek_done_id bigint      NOT NULL DEFAULT 0,
    "by"         text        NOT NULL DEFAULT '',
    reason       text        NOT NULL DEFAULT '',
    updated_at   timestamptz NOT NULL,
    PRIMARY KEY (source, unit)
);
CREATE TABLE drover_control_audit (
    id     bigserial   PRIMARY KEY,
    at     timestamptz NOT NULL DEFAULT now(),
    node   text        NOT NULL,
    "by"   text        NOT NULL,
    action text        NOT NULL,
    source text        NOT NULL,
    unit   text        NOT NULL,
    args   text        NOT NULL,
    reason text        NOT NULL
);
CREATE INDEX drover_control_audit_unit ON drover_control_audit (unit, id);
