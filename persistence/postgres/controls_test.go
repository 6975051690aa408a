package postgres

import (
	"testing"
	"time"

	"github.com/drover-dev/drover/persistence"
)

// The controls of one schema are not another's.
func TestControlsSchemasAreIsolated(t *testing.T) {
	url := pg.URL(t)
	a := openTest(t, url, Config{Schema: "ctl_a"})
	b := openTest(t, url, Config{Schema: "Ctl_B"})
	paused := true
	if _, err := a.SetControl(t.Context(), persistence.ControlChange{Source: "orders", Paused: &paused, Action: "pause"}); err != nil {
		t.Fatal(err)
	}
	if cs, err := b.ListControls(t.Context()); err != nil || len(cs) != 0 {
		t.Errorf("controls seen from the other schema: %v, %v", cs, err)
	}
	if as, err := b.ListAudit(t.Context(), persistence.AuditFilter{}); err != nil || len(as) != 0 {
		t.Errorf("audit seen from the other schema: %v, %v", as, err)
	}
	if cs, err := a.ListControls(t.Context()); err != nil || len(cs) != 1 {
		t.Errorf("controls of ctl_a: %v, %v; want the one written", cs, err)
	}
}

// A seek's age is the server's: a seek asked two hours ago (by now())
// expires, while a seek written by a node from before migration 7 (seek_id
// one up and updated_at, seek_requested_at left as it was) counts from
// updated_at and is young, so a rolling upgrade expires nothing at once.
func TestSeekAgeCountsFromTheServersClock(t *testing.T) {
	s := openTest(t, pg.URL(t), Config{Schema: "seek_age"})
	ctx, controls := t.Context(), s.name("drover_controls")
	if _, err := s.SetControl(ctx, persistence.ControlChange{Source: "orders", Unit: "orders/0", Seek: "5", Action: "seek"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.pool.Exec(ctx, `UPDATE `+controls+` SET seek_requested_at = now() - interval '2 hours',
		updated_at = now() - interval '2 hours'`); err != nil {
		t.Fatal(err)
	}
	row := onlyControl(t, s)
	if row.SeekAge < 2*time.Hour || row.SeekAge > 2*time.Hour+time.Minute {
		t.Errorf("age of a seek asked 2h ago = %s, want 2h", row.SeekAge)
	}
	e := persistence.SeekExpiry{Source: "orders", Unit: "orders/0", ID: 1, OlderThan: 3 * time.Hour, Why: "test"}
	if ok, err := s.ExpireSeek(ctx, e); err != nil || ok {
		t.Errorf("ExpireSeek(2h old, older than 3h) = %v, %v; want false", ok, err)
	}
	e.OlderThan = time.Hour
	if ok, err := s.ExpireSeek(ctx, e); err != nil || !ok {
		t.Errorf("ExpireSeek(2h old, older than 1h) = %v, %v; want true", ok, err)
	}
	// an old node's seek: its SetControl leaves seek_requested_at
	if _, err := s.pool.Exec(ctx, `UPDATE `+controls+` SET seek = '7', seek_id = seek_id + 1, updated_at = now()`); err != nil {
		t.Fatal(err)
	}
	if row := onlyControl(t, s); !row.PendingSeek() || row.SeekAge > time.Minute {
		t.Errorf("an old writer's new seek: pending %v, age %s; want pending and young", row.PendingSeek(), row.SeekAge)
	}
	e.ID = 2
	if ok, err := s.ExpireSeek(ctx, e); err != nil || ok {
		t.Errorf("ExpireSeek(an old writer's fresh seek, older than 1h) = %v, %v; want false", ok, err)
	}
}

func onlyControl(t *testing.T, s *Store) persistence.Control {
	t.Helper()
	cs, err := s.ListControls(t.Context())
	if err != nil || len(cs) != 1 {
		t.Fatalf("controls: %v, %v; want one row", cs, err)
	}
	return cs[0]
}
