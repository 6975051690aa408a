-- Issue 12 item 5: a node's renewal round writes its heartbeat row instead
-- of every lease row (persistence.Leases.RenewLeases). A lease's staleness
-- (AcquireRequest.Stale) is judged by the later of its renewed_at and its
-- owner's heartbeat_at; a lease row is extended only when its expiry is
-- less than half the TTL away.
CREATE TABLE drover_nodes (
    node         text        PRIMARY KEY,
    heartbeat_at timestamptz NOT NULL
);
