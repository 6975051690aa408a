-- The stream incarnation a checkpoint's position belongs to (a Kafka topic
-- ID): a topic deleted and created again, then refilled past the
-- checkpoint, is told from the old one by it. '' is unknown (written
-- before this step, or by a broker without such an identity); a unit
-- records it at its next open.
ALTER TABLE drover_checkpoints ADD COLUMN stream_id text NOT NULL DEFAULT '';
