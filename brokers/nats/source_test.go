package nats

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/drover-dev/drover/brokers"
	"github.com/drover-dev/drover/internal/redact"
)

// The section's problems, by their paths in the file's names, in the
// order of its fields; a bad URL entry quoted masked.
func TestSourceConfigValidate(t *testing.T) {
	ok := SourceConfig{URL: "nats://h:1", Stream: "S", Mode: ModeQueue, Consumer: "c"}
	tests := []struct {
		name string
		cfg  SourceConfig
		want []string
	}{
		{"ok", ok, nil},
		{"empty", SourceConfig{}, []string{"url: required", "stream: required", "mode: required: one of queue, stream"}},
		{"names", SourceConfig{URL: "nats://h:1, http://u:pw-hidden@h:2", Stream: "a.b", Mode: "pull", Consumer: "c d"}, []string{
			`url: entry 2 ("http://u:xxxxx@h:2") must be nats://host:port (or tls://, ws://, wss://)`,
			`stream: "a.b" must not contain spaces, '.', '*', '>' or path separators`,
			`mode: must be one of queue, stream, not "pull"`,
			`consumer: "c d" must not contain spaces, '.', '*', '>' or path separators`}},
		{"two @", SourceConfig{URL: "nats://u:p@ss@h:1", Stream: "S", Mode: ModeQueue}, []string{"url: entry 1: " + redact.ErrUnescapedAt.Error()}},
		{"stream mode", SourceConfig{URL: "nats://h:1", Stream: "S", Mode: ModeStream, Consumer: "c", AckWait: time.Second, MaxAckPending: 3}, []string{
			"consumer: only valid with mode: queue", "ack_wait: only valid with mode: queue", "max_ack_pending: only valid with mode: queue"}},
		{"negative", SourceConfig{URL: "nats://h:1", Stream: "S", Mode: ModeQueue, AckWait: -time.Second, MaxAckPending: -1}, []string{
			"ack_wait: must not be negative, not -1s", "max_ack_pending: must not be negative, not -1"}},
		{"user", SourceConfig{URL: "nats://h:1", Stream: "S", Mode: ModeQueue, User: "u"}, []string{"password: required with user"}},
		{"password", SourceConfig{URL: "nats://h:1", Stream: "S", Mode: ModeQueue, Password: "p"}, []string{"user: required with password"}},
		{"both", SourceConfig{URL: "nats://h:1", Stream: "S", Mode: ModeQueue, User: "u", Password: "p", CredentialsFile: "/c"}, []string{
			"credentials_file: use credentials_file or user and password, not both"}},
		// what the adapter refuses when the node starts is refused here, so
		// that a config drover check accepts starts
		{"subject", SourceConfig{URL: "nats://h:1", Stream: "S", Mode: ModeStream, Subject: "a..b"}, []string{`subject: "a..b": empty token`}},
		{"ack_wait below 1ms", SourceConfig{URL: "nats://h:1", Stream: "S", Mode: ModeQueue, AckWait: time.Microsecond}, []string{
			"ack_wait: must be at least 1ms (or 0 for the default 30s), not 1µs"}},
		{"token and user", SourceConfig{URL: "nats://tok-hidden@h:1", Stream: "S", Mode: ModeQueue, User: "u", Password: "p"}, []string{
			"url: a token (a user name alone in the URL) and user, password or credentials_file: use one"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cfg.Validate()
			var got []string
			var fes brokers.FieldErrors
			if err != nil {
				if !errors.As(err, &fes) || !strings.HasPrefix(err.Error(), "nats: ") {
					t.Fatalf("error %v: not nats: FieldErrors", err)
				}
				for _, fe := range fes {
					got = append(got, fe.Error())
				}
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("problems\n got %q\nwant %q", got, tt.want)
			}
			if err != nil && (strings.Contains(err.Error(), "pw-hidden") || strings.Contains(err.Error(), "tok-hidden")) {
				t.Errorf("the password shows: %v", err)
			}
		})
	}
}

// Credentials written into a URL move to their own fields: user:password@
// to User and Password (unless set), a user name alone to Token.
func TestSourceConfigConn(t *testing.T) {
	tests := []struct {
		name          string
		cfg           SourceConfig
		urls          []string
		user, pw, tok string
		err           string
	}{
		{"plain", SourceConfig{URL: "nats://a:1, tls://b:2"}, []string{"nats://a:1", "tls://b:2"}, "", "", "", ""},
		{"user and password", SourceConfig{URL: "nats://u:pw@a:1,nats://u:pw@b:2"}, []string{"nats://a:1", "nats://b:2"}, "u", "pw", "", ""},
		{"fields win", SourceConfig{URL: "nats://u:pw@a:1", User: "v", Password: "q"}, []string{"nats://a:1"}, "v", "q", "", ""},
		{"token", SourceConfig{URL: "nats://tok@a:1"}, []string{"nats://a:1"}, "", "", "tok", ""},
		{"token and user", SourceConfig{URL: "nats://tok@a:1", User: "u", Password: "p"}, nil, "", "", "",
			"nats.url: a token (a user name alone in the URL) and user, password or credentials_file: use one"},
		{"token and creds", SourceConfig{URL: "nats://tok@a:1", CredentialsFile: "/c"}, nil, "", "", "",
			"nats.url: a token (a user name alone in the URL) and user, password or credentials_file: use one"},
		{"not a URL", SourceConfig{URL: "nats://a:1, nats://u:pw-hidden@h:1%zz"}, nil, "", "", "", "nats.url[1] nats://u:xxxxx@h:1%zz: not a URL"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := tt.cfg.Conn()
			if tt.err != "" {
				if err == nil || err.Error() != tt.err {
					t.Fatalf("error %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(c.URLs, tt.urls) || c.User != tt.user || c.Password.Reveal() != tt.pw || c.Token.Reveal() != tt.tok {
				t.Errorf("conn %v (password %q, token %q)", c, c.Password.Reveal(), c.Token.Reveal())
			}
			if err := c.Validate(); err != nil {
				t.Errorf("the conn config does not validate: %v", err)
			}
		})
	}
}

// QueueConfig and StreamConfig carry the section's settings, and the
// adapter's own checks.
func TestSourceConfigQueueAndStream(t *testing.T) {
	n := SourceConfig{URL: "nats://u:pw@h:1", Stream: "S", Subject: "s.>", Mode: ModeQueue, Consumer: "c",
		AckWait: 5 * time.Second, MaxAckPending: 7}
	q, err := n.QueueConfig(brokers.Latest)
	if err != nil {
		t.Fatal(err)
	}
	want := QueueConfig{Conn: ConnConfig{URLs: []string{"nats://h:1"}, User: "u", Password: "pw"}, Stream: "S", Durable: "c",
		FilterSubjects: []string{"s.>"}, AckWait: 5 * time.Second, MaxAckPending: 7, Start: brokers.Latest}
	if !reflect.DeepEqual(q, want) {
		t.Errorf("queue config\n got %+v\nwant %+v", q, want)
	}
	n.Mode, n.Consumer, n.AckWait, n.MaxAckPending, n.Subject = ModeStream, "", 0, 0, ""
	s, err := n.StreamConfig()
	if err != nil {
		t.Fatal(err)
	}
	if s.Stream != "S" || s.Subjects != nil || s.Conn.User != "u" {
		t.Errorf("stream config %+v", s)
	}
	n.Subject = "a..b"
	if _, err := n.StreamConfig(); err == nil || !strings.Contains(err.Error(), `nats stream config: Subjects[0] "a..b": empty token`) {
		t.Errorf("bad subject: %v", err)
	}
	if _, err := n.QueueConfig(brokers.Earliest); err == nil || !strings.Contains(err.Error(), `nats queue config: Durable: required`) {
		t.Errorf("no consumer: %v", err)
	}
}

// The section prints with its password and URL masked, however it is
// printed (a *SourceConfig inside another value too).
func TestSourceConfigFormat(t *testing.T) {
	n := &SourceConfig{URL: "nats://u:url-pw-Zq9@h:1", Stream: "S", User: "u", Password: "pw-Zq9"}
	outer := struct{ N *SourceConfig }{n}
	for _, f := range []string{"%v", "%+v", "%#v", "%s", "%q"} {
		for _, out := range []string{fmt.Sprintf(f, *n), fmt.Sprintf(f, n), fmt.Sprintf(f, outer)} {
			if strings.Contains(out, "Zq9") {
				t.Fatalf("%s: a secret shows: %s", f, out)
			}
		}
	}
}
