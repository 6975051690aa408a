-- Issue 9: lease staleness and the initial units of a source.
--
-- renewed_at is the server's time of a lease's last Acquire or renewal:
-- a holder absent from a caller's membership view is taken over only when
-- it has stopped renewing (AcquireRequest.Stale). Rows that exist when this
-- step runs get their acquired_at: the one moment the holder is known to
-- have reached the store. Their holders are drover processes older than
-- this step, whose renewals do not write renewed_at, so they are judged
-- by the takeover rule of before (absent from the view: taken over).
ALTER TABLE drover_leases ADD COLUMN renewed_at timestamptz;
UPDATE drover_leases SET renewed_at = acquired_at;
ALTER TABLE drover_leases ALTER COLUMN renewed_at SET NOT NULL;

-- What each source was when drover first discovered it (Sources.InitSource):
-- the first caller's sorted unit list, as a JSON array of strings.
CREATE TABLE drover_sources (
    source     text COLLATE "C" PRIMARY KEY,
    units      jsonb NOT NULL CHECK (jsonb_typeof(units) = 'array'),
    created_at timestamptz NOT NULL
);
