package postgres

import "fmt"

// statements are the SQL texts of the drover_ tables, built once per Store
// with its schema-qualified names.
type statements struct {
	acquire, holder, renew, renewMany, release, listLeases string

	initSource, getSource string

	fence, dedupe, deadLetters, checkpoint, resetCheckpoint, seekDone string

	getCheckpoint, listCheckpoints string
	getDeadLetter, setStatus       string
	listDeadLetters                string // + filters, ORDER BY, LIMIT
	writeQuality, listQuality      string
	pruneDedupe                    string
}

const leaseCols = "unit, owner, token, expires_at, acquired_at, renewed_at"

func newStatements(name func(string) string) statements {
	leases := name("drover_leases")
	checkpoints := name("drover_checkpoints")
	deadLetters := name("drover_dead_letters")
	dedupe := name("drover_dedupe")
	quality := name("drover_quality")
	sources := name("drover_sources")
	nodes := name("drover_nodes")
	// seen is the renewed_at of lease row l as reported: the later of its
	// own and its owner's heartbeat (persistence.Lease.RenewedAt).
	seen := `CASE WHEN l.owner = '' THEN l.renewed_at ELSE greatest(l.renewed_at,
		(SELECT n.heartbeat_at FROM ` + nodes + ` n WHERE n.node = l.owner)) END`
	seenCols := "l.unit, l.owner, l.token, l.expires_at, l.acquired_at, " + seen
	return statements{
		// One statement, so that concurrent acquirers serialise on the row
		// lock ON CONFLICT takes: the second re-checks the WHERE against
		// the first one's row and finds it held. Expiry and staleness are
		// judged by the server's now(). A holder absent from $4 (the
		// caller's view) is taken over only when its last renewal and its
		// heartbeat are at least $5 old.
		//
		// prev is the row as the statement's snapshot has it: the holder
		// replaced, reported (persistence.Lease.PrevOwner) only when its
		// token is the one just before the new one (a concurrent acquire
		// the upsert waited for is newer than the snapshot: then none).
		acquire: `WITH prev AS (SELECT owner, token FROM ` + leases + ` WHERE unit = $1),
			up AS (INSERT INTO ` + leases + ` AS l (` + leaseCols + `)
			VALUES ($1, $2, 1, now() + $3::interval, now(), now())
			ON CONFLICT (unit) DO UPDATE SET
				owner = excluded.owner,
				token = l.token + 1,
				expires_at = excluded.expires_at,
				acquired_at = excluded.acquired_at,
				renewed_at = excluded.renewed_at
			WHERE l.owner = '' OR l.expires_at <= now() OR l.owner = excluded.owner
				OR (NOT (l.owner = ANY ($4::text[])) AND ` + seen + ` <= now() - $5::interval)
			RETURNING ` + leaseCols + `)
			SELECT up.unit, up.owner, up.token, up.expires_at, up.acquired_at, up.renewed_at,
				coalesce(prev.owner, ''), coalesce(prev.token, up.token - 1)
			FROM up LEFT JOIN prev ON prev.token = up.token - 1`,
		// The holder after a refused acquire, and whether the server now
		// finds it expired or stale (the caller tells whether it is live).
		holder: `SELECT ` + seenCols + `, l.expires_at <= now(), ` + seen + ` <= now() - $2::interval
			FROM ` + leases + ` l WHERE l.unit = $1`,
		renew: `UPDATE ` + leases + ` SET expires_at = now() + $4::interval, renewed_at = now()
			WHERE unit = $1 AND owner = $2 AND owner <> '' AND token = $3
			RETURNING ` + leaseCols,
		// One renewal round of $1, in one statement: its heartbeat, and of
		// the leases of $2/$3 (with the expiries $5 the caller knows) those
		// it holds with that token whose expiry is less than $4/2 away are
		// extended. Rows another transaction has locked (an Apply's fence,
		// an orphaned transaction) are skipped rather than waited for. Only
		// what the caller cannot know is returned: 'b' the heartbeat's
		// time; 'r' each lease extended; 's' each lease due but skipped
		// (still held); 'h' a lease held, not due, whose stored expiry or
		// acquisition is not the one given; 'l' each lease not held with
		// its token (lost). A lease of $2 in none is held as given.
		renewMany: `WITH req AS (
				SELECT * FROM unnest($2::text[], $3::bigint[], $5::timestamptz[], $6::timestamptz[])
					AS r(unit, token, expires_at, acquired_at)
			), beat AS (
				INSERT INTO ` + nodes + ` AS n (node, heartbeat_at) VALUES ($1, now())
				ON CONFLICT (node) DO UPDATE SET heartbeat_at = greatest(n.heartbeat_at, excluded.heartbeat_at)
				RETURNING heartbeat_at
			), held AS (
				SELECT l.unit, l.token, l.expires_at, l.acquired_at,
					l.expires_at < now() + $4::interval / 2 AS due,
					l.expires_at IS DISTINCT FROM r.expires_at OR l.acquired_at IS DISTINCT FROM r.acquired_at AS differs
				FROM ` + leases + ` l JOIN req r ON l.unit = r.unit AND l.token = r.token
				WHERE l.owner = $1 AND l.owner <> ''
			), locked AS (
				SELECT l.unit FROM ` + leases + ` l JOIN req r ON l.unit = r.unit AND l.token = r.token
				WHERE l.owner = $1 AND l.owner <> '' AND l.expires_at < now() + $4::interval / 2
				ORDER BY l.unit
				FOR UPDATE OF l SKIP LOCKED
			), renewed AS (
				UPDATE ` + leases + ` l SET expires_at = now() + $4::interval, renewed_at = now()
				FROM locked WHERE l.unit = locked.unit
				RETURNING l.unit, l.token, l.expires_at, l.acquired_at
			)
			SELECT 'b', '', 0::bigint, heartbeat_at, heartbeat_at FROM beat
			UNION ALL
			SELECT 'r', unit, token, expires_at, acquired_at FROM renewed
			UNION ALL
			SELECT CASE WHEN h.due THEN 's' ELSE 'h' END, h.unit, h.token, h.expires_at, h.acquired_at FROM held h
			WHERE (h.due OR h.differs) AND NOT EXISTS (SELECT 1 FROM renewed r WHERE r.unit = h.unit)
			UNION ALL
			SELECT 'l', r.unit, r.token, now(), now() FROM req r
			WHERE NOT EXISTS (SELECT 1 FROM held h WHERE h.unit = r.unit AND h.token = r.token)`,
		release: `UPDATE ` + leases + ` SET owner = '', expires_at = now()
			WHERE unit = $1 AND owner = $2 AND owner <> '' AND token = $3`,
		listLeases: `SELECT ` + seenCols + ` FROM ` + leases + ` l ORDER BY l.unit`,

		// Two statements, each its own transaction: the SELECT sees the
		// row of whichever caller won, committed before the INSERT returned
		// (it waits for a concurrent inserter of the same source).
		initSource: `INSERT INTO ` + sources + ` (source, units, created_at) VALUES ($1, $2::jsonb, now())
			ON CONFLICT (source) DO NOTHING`,
		getSource: `SELECT units FROM ` + sources + ` WHERE source = $1`,

		// Locks the lease row until the batch commits (an Acquire that
		// would change the token waits, so a batch commits only under the
		// token it checked) and raises DR001 on another token.
		fence: `SELECT ` + name("drover_fence") + `($1, $2)`,
		dedupe: `INSERT INTO ` + dedupe + ` (source, message_id, applied_at)
			SELECT $1, id, now() FROM unnest($2::text[]) AS u(id)
			ON CONFLICT DO NOTHING
			RETURNING message_id`,
		deadLetters: `INSERT INTO ` + deadLetters + ` AS d (source, unit, position, msg_key, payload, reason,
				attempts, status, first_failed_at, last_failed_at, payload_bytes)
			SELECT $1, $2, u.position, u.msg_key, u.payload, u.reason, u.n, 'pending', now(), now(), u.size
			FROM unnest($3::text[], $4::text[], $5::bytea[], $6::text[], $7::int[], $8::bigint[])
				AS u(position, msg_key, payload, reason, n, size)
			ON CONFLICT (source, unit, position) DO UPDATE SET
				attempts = d.attempts + excluded.attempts,
				last_failed_at = excluded.last_failed_at,
				msg_key = excluded.msg_key,
				payload = excluded.payload,
				payload_bytes = excluded.payload_bytes,
				reason = excluded.reason,
				status = 'pending'`,
		// A checkpoint moves only forward, in the order of
		// brokers.ComparePositions; Finished is sticky and marks the
		// position even when it does not move.
		checkpoint: `INSERT INTO ` + checkpoints + ` AS c (unit, source, position, token, finished, updated_at)
			VALUES ($1, $2, $3, $4, $5, now())
			ON CONFLICT (unit) DO UPDATE SET
				position = CASE WHEN ` + positionAfter("excluded.position", "c.position") + `
					THEN excluded.position ELSE c.position END,
				source = excluded.source,
				token = excluded.token,
				finished = c.finished OR excluded.finished,
				updated_at = excluded.updated_at
			WHERE ` + positionAfter("excluded.position", "c.position") + `
				OR (excluded.finished AND NOT c.finished)`,

		// Batch.Reset: the position as given, backwards too; Finished as
		// the batch says (a stored one is cleared).
		resetCheckpoint: `INSERT INTO ` + checkpoints + ` AS c (unit, source, position, token, finished, stream_id, updated_at)
			VALUES ($1, $2, $3, $4, $5, $6, now())
			ON CONFLICT (unit) DO UPDATE SET
				position = excluded.position,
				source = excluded.source,
				token = excluded.token,
				finished = excluded.finished,
				stream_id = CASE WHEN excluded.stream_id = '' THEN c.stream_id ELSE excluded.stream_id END,
				updated_at = excluded.updated_at`,

		// Batch.SeekDone: the unit's control row's seek is done.
		seekDone: `SELECT ` + name("drover_seek_done") + `($1, $2, $3)`,

		getCheckpoint:   `SELECT unit, source, position, finished, token, updated_at, stream_id FROM ` + checkpoints + ` WHERE unit = $1`,
		listCheckpoints: `SELECT unit, source, position, finished, token, updated_at, stream_id FROM ` + checkpoints + ` WHERE source = $1 ORDER BY unit`,

		getDeadLetter:   `SELECT ` + deadLetterCols + ` FROM ` + deadLetters + ` WHERE id = $1`,
		listDeadLetters: `SELECT ` + deadLetterCols + ` FROM ` + deadLetters + ` WHERE id > $1`,
		setStatus:       `UPDATE ` + deadLetters + ` SET status = $2 WHERE id = $1`,

		writeQuality: `INSERT INTO ` + quality + ` (source, node, window_start, window_end, rows_read,
				rows_failed, fields, drift, status)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) RETURNING id`,
		listQuality: `SELECT id, source, node, window_start, window_end, rows_read, rows_failed,
				fields, drift, status FROM ` + quality + ` WHERE ($1 = '' OR source = $1)
			ORDER BY id DESC LIMIT $2`,

		pruneDedupe: `DELETE FROM ` + dedupe + ` WHERE ctid = ANY (ARRAY(
			SELECT ctid FROM ` + dedupe + ` WHERE applied_at < $1 LIMIT $2))`,
	}
}

const deadLetterCols = `id, source, unit, position, msg_key, payload, reason, attempts, status,
	first_failed_at, last_failed_at, payload_bytes`

// positionAfter is SQL true when position a is after position b in the
// order of brokers.ComparePositions: the empty position first, then start
// markers ('@...') as text, then unsigned decimals and sub-positions
// "<decimal>/<decimal>" by value (the number before the slash, leading
// zeros ignored, by length, then by digits; then a sub-position before the
// plain number; then the index the same way), then other strings bytewise.
func positionAfter(a, b string) string {
	return positionKey(a) + " > " + positionKey(b)
}

func positionKey(p string) string {
	return fmt.Sprintf(`(CASE WHEN %[1]s = '' THEN 0 WHEN left(%[1]s, 1) = '@' THEN 1
			WHEN %[1]s ~ '^[0-9]+(/[0-9]+)?$' THEN 2 ELSE 3 END,
		CASE WHEN %[1]s ~ '^[0-9]+(/[0-9]+)?$' THEN length(ltrim(split_part(%[1]s, '/', 1), '0')) ELSE 0 END,
		(CASE WHEN %[1]s ~ '^[0-9]+(/[0-9]+)?$' THEN ltrim(split_part(%[1]s, '/', 1), '0') ELSE %[1]s END) COLLATE "C",
		CASE WHEN %[1]s ~ '^[0-9]+/[0-9]+$' THEN 0 ELSE 1 END,
		CASE WHEN %[1]s ~ '^[0-9]+/[0-9]+$' THEN length(ltrim(split_part(%[1]s, '/', 2), '0')) ELSE 0 END,
		(CASE WHEN %[1]s ~ '^[0-9]+/[0-9]+$' THEN ltrim(split_part(%[1]s, '/', 2), '0') ELSE '' END) COLLATE "C")`, p)
}
