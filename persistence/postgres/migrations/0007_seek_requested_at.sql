-- When a control row's newest seek was asked for (NULL: none): a seek
-- pending longer than the node's seek expiry is marked done, expired,
-- never carried out.
ALTER TABLE drover_controls ADD COLUMN seek_requested_at timestamptz;

-- Batch.SeekDone: marks the unit's control row's seek p_id done, in the
-- batch's transaction; raises DR002 when the row marks it done already
-- (carried out, refused, expired, overtaken), so the batch writes
-- nothing (persistence.ErrSeekDone). A unit with no row writes nothing.
CREATE FUNCTION drover_seek_done(p_source text, p_unit text, p_id bigint) RETURNS bigint
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
DECLARE
    done bigint;
BEGIN
    SELECT seek_done_id INTO done FROM drover_controls WHERE source = p_source AND unit = p_unit FOR UPDATE;
    IF NOT FOUND THEN
        RETURN 0;
    END IF;
    IF done >= p_id THEN
        RAISE EXCEPTION 'seek % of % done already (done: %)', p_id, p_unit, done USING ERRCODE = 'DR002';
    END IF;
    UPDATE drover_controls SET seek_done_id = p_id WHERE source = p_source AND unit = p_unit;
    RETURN p_id;
END
$$;

-- A seek pending from before this step counts as asked at its row's last
-- change.
UPDATE drover_controls SET seek_requested_at = updated_at WHERE seek <> '';
