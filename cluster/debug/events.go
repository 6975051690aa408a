package debug

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/drover-dev/drover/actors/events"
	"github.com/drover-dev/drover/actors/placement"
)

// Bounds of GET /debug/events.
const (
	// DefaultEventsLimit is the number of events answered when the
	// request names no limit; MaxEventsLimit the most it may ask for.
	DefaultEventsLimit = 1000
	MaxEventsLimit     = events.DefaultCapacity
	// maxEventsBytes bounds the body of another member's events.
	maxEventsBytes = 16 << 20
)

// KindMemberGone is the kind of the event the cluster scope adds for each
// member in the memory of gone members: Node is the member, Time when it
// was first seen missing, Reason how it went ("died" or "left") and the
// error of the last read of it. With ?unit= it is added only when the
// member's last tree held the unit (Unit is then set).
const KindMemberGone = "member_gone"

// EventLog is the node's log the endpoint reads (events.Log): Node is
// the name it stamps on its events, this node's.
type EventLog interface {
	Query(events.Filter) []events.Event
	Node() string
}

// EventsAnswer is the JSON of GET /debug/events: the events, oldest first.
// With scope=cluster, Nodes lists every member asked, how many of its
// events matched, and its error when it did not answer.
type EventsAnswer struct {
	Node   string         `json:"node,omitempty"`
	Events []events.Event `json:"events"`
	Nodes  []EventsFrom   `json:"nodes,omitempty"`
}

// EventsFrom is one member's part of a cluster answer.
type EventsFrom struct {
	Node  string `json:"node"`
	Count int    `json:"count"`
	Error string `json:"error,omitempty"`
}

// eventsQuery is a parsed GET /debug/events.
type eventsQuery struct {
	filter  events.Filter
	cluster bool
}

// parseEventsQuery reads unit, source, since (RFC 3339, or a duration
// such as 10m meaning that long before now), limit and scope; an error
// names the parameter.
func parseEventsQuery(q url.Values, now time.Time) (eventsQuery, error) {
	var r eventsQuery
	r.filter.Unit, r.filter.Source = q.Get("unit"), q.Get("source")
	if s := q.Get("since"); s != "" {
		if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
			r.filter.Since = t
		} else if d, err := time.ParseDuration(s); err == nil && d >= 0 {
			r.filter.Since = now.Add(-d)
		} else {
			return r, fmt.Errorf("since %q: want an RFC 3339 time (2026-12-02T01:00:00Z) or a duration (10m)", s)
		}
	}
	r.filter.Limit = DefaultEventsLimit
	if s := q.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > MaxEventsLimit {
			return r, fmt.Errorf("limit %q: want a number from 1 to %d", s, MaxEventsLimit)
		}
		r.filter.Limit = n
	}
	switch scope := q.Get("scope"); scope {
	case "", "node":
	case "cluster":
		r.cluster = true
	default:
		return r, fmt.Errorf("scope %q: must be node or cluster", scope)
	}
	return r, nil
}

func (s *Server) events(w http.ResponseWriter, r *http.Request) {
	q, err := parseEventsQuery(r.URL.Query(), s.cfg.Clock.Now())
	if err != nil {
		text(w, http.StatusBadRequest, err.Error())
		return
	}
	var self string
	if s.cfg.Events != nil {
		self = s.cfg.Events.Node()
	} else {
		self = s.cfg.Node.Tree().Node
	}
	if !q.cluster {
		b, err := json.Marshal(EventsAnswer{Node: self, Events: s.localEvents(q.filter)})
		s.writeJSON(w, "events", b, err)
		return
	}
	ans := s.clusterEvents(r.Context(), self, q.filter)
	if r.Context().Err() != nil {
		return // the client is gone
	}
	b, err := json.Marshal(ans)
	s.writeJSON(w, "events", b, err)
}

func (s *Server) localEvents(f events.Filter) []events.Event {
	if s.cfg.Events == nil {
		return []events.Event{}
	}
	return s.cfg.Events.Query(f)
}

// clusterEvents asks every other live member for its events with the same
// filter, concurrently (FetchTimeout each, the token sent as the cluster
// tree sends it), merges them with this node's by time and adds the gone
// members' entries.
func (s *Server) clusterEvents(ctx context.Context, self string, f events.Filter) EventsAnswer {
	var others []placement.Member
	for _, m := range s.cfg.Node.Members() {
		if m.Name != self {
			others = append(others, m)
		}
	}
	local := s.localEvents(f)
	lists := make([][]events.Event, len(others)+2)
	from := make([]EventsFrom, len(others)+1)
	lists[0], from[0] = local, EventsFrom{Node: self, Count: len(local)}
	var wg sync.WaitGroup
	for i, m := range others {
		wg.Go(func() {
			from[i+1].Node = m.Name
			es, err := s.memberEvents(ctx, m, f)
			if err != nil {
				from[i+1].Error = err.Error()
				return
			}
			lists[i+1], from[i+1].Count = es, len(es)
		})
	}
	wg.Wait()
	lists[len(lists)-1] = s.goneEvents(f)
	return EventsAnswer{Events: events.Merge(f.Limit, lists...), Nodes: from}
}

// goneEvents are the KindMemberGone entries of the members gone now.
func (s *Server) goneEvents(f events.Filter) []events.Event {
	var out []events.Event
	for _, g := range s.gone.list(s.cfg.Clock.Now()) {
		e := events.Event{Time: g.Gone.Since, Node: g.Node, Kind: KindMemberGone, Reason: g.Gone.How}
		if g.Gone.LastError != "" {
			e.Reason += "; last read: " + g.Gone.LastError
		}
		if f.Unit != "" {
			if !holds(g, f.Unit) {
				continue
			}
			e.Unit = f.Unit
		}
		if f.Source != "" || !f.Match(e) {
			continue // about a node, not a source
		}
		out = append(out, e)
	}
	return out
}

// holds reports whether the last tree of gone member g had unit on it.
func holds(g GoneNode, unit string) bool {
	for _, src := range g.Sources {
		for _, u := range src.Units {
			if u.Unit == unit {
				return true
			}
		}
	}
	return false
}

// memberEvents asks member m for its own events matching f.
func (s *Server) memberEvents(ctx context.Context, m placement.Member, f events.Filter) ([]events.Event, error) {
	q := url.Values{"limit": {strconv.Itoa(f.Limit)}}
	if f.Unit != "" {
		q.Set("unit", f.Unit)
	}
	if f.Source != "" {
		q.Set("source", f.Source)
	}
	if !f.Since.IsZero() {
		q.Set("since", f.Since.UTC().Format(time.RFC3339Nano))
	}
	body, u, err := s.memberGet(ctx, m, "/debug/events?"+q.Encode(), maxEventsBytes)
	if err != nil {
		return nil, err
	}
	var a EventsAnswer
	if err := json.Unmarshal(body, &a); err != nil {
		return nil, fmt.Errorf("GET %s: not events: %w", u, err)
	}
	if a.Node != m.Name {
		return nil, fmt.Errorf("GET %s: answered as node %q, not %q", u, a.Node, m.Name)
	}
	for _, e := range a.Events {
		if e.Node != m.Name {
			return nil, fmt.Errorf("GET %s: an event of node %q in the answer of %q", u, e.Node, m.Name)
		}
	}
	return a.Events, nil
}
