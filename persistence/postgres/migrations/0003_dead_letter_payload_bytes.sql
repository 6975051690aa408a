-- Issue 10: dead-letter payloads are cut at dead_letter_max_bytes, so that
-- a batch of oversize messages stays small enough to commit. payload_bytes
-- is the size of the message body: a row whose payload is shorter holds
-- only its first bytes, and replay refuses it. Rows written before this
-- step hold their whole body.
ALTER TABLE drover_dead_letters ADD COLUMN payload_bytes bigint;
UPDATE drover_dead_letters SET payload_bytes = coalesce(octet_length(payload), 0);
ALTER TABLE drover_dead_letters ALTER COLUMN payload_bytes SET NOT NULL;
