package nats

import (
	"bytes"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/drover-dev/drover/brokers"
)

func TestConnConfigValidate(t *testing.T) {
	tests := []struct {
		name string
		cfg  ConnConfig
		want string // substring of the error; "" for none
	}{
		{"zero", ConnConfig{}, ""},
		{"two urls", ConnConfig{URLs: []string{"nats://a:4222", "tls://10.0.0.1:4443"}}, ""},
		{"websocket", ConnConfig{URLs: []string{"wss://nats.example.com:443"}}, ""},
		{"ipv6", ConnConfig{URLs: []string{"nats://[::1]:4222"}}, ""},
		{"no scheme", ConnConfig{URLs: []string{"nats://a:4222", "b:4222"}}, `URLs[1] "b:4222"`},
		{"http", ConnConfig{URLs: []string{"http://a:4222"}}, `URLs[0] "http://a:4222": scheme "http"`},
		{"no port", ConnConfig{URLs: []string{"nats://a"}}, `URLs[0] "nats://a": want host:port`},
		{"bad port", ConnConfig{URLs: []string{"nats://a:99999"}}, `port "99999"`},
		{"empty host", ConnConfig{URLs: []string{"nats://:4222"}}, `empty host`},
		{"path", ConnConfig{URLs: []string{"nats://a:4222/x"}}, `no path`},
		{"empty entry", ConnConfig{URLs: []string{""}}, `URLs[0] "": empty`},
		{"credentials in url", ConnConfig{URLs: []string{"nats://u:hunter2@a:4222"}}, `credentials in the URL`},
		{"password without user", ConnConfig{Password: "x"}, `Password: set without User`},
		{"user and token", ConnConfig{User: "u", Token: "t"}, `set only one way`},
		{"token and creds", ConnConfig{Token: "t", CredsFile: "/x.creds"}, `set only one way`},
		{"negative timeout", ConnConfig{ConnectTimeout: -time.Second}, `ConnectTimeout: -1s is negative`},
		{"negative reconnects", ConnConfig{MaxReconnects: -1}, `MaxReconnects: -1`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cfg.Validate()
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("Validate: %v", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("Validate: %v, want an error containing %q", err, tt.want)
			}
			if err != nil && strings.Contains(err.Error(), "hunter2") {
				t.Fatalf("the error repeats the password: %v", err)
			}
		})
	}
}

func TestQueueAndStreamConfigValidate(t *testing.T) {
	ok := QueueConfig{Stream: "ORDERS", Durable: "drover"}
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"queue ok", ok.Validate(), ""},
		{"queue conn field named", QueueConfig{Conn: ConnConfig{URLs: []string{"x"}}, Stream: "S", Durable: "d"}.Validate(), `nats queue config: Conn.URLs[0] "x"`},
		{"queue no stream", QueueConfig{Durable: "d"}.Validate(), `Stream: required`},
		{"queue no durable", QueueConfig{Stream: "S"}.Validate(), `Durable: required`},
		{"queue dotted durable", QueueConfig{Stream: "S", Durable: "a.b"}.Validate(), `Durable "a.b": must not contain`},
		{"queue bad filter", QueueConfig{Stream: "S", Durable: "d", FilterSubjects: []string{"a.>", "a..b"}}.Validate(), `FilterSubjects[1] "a..b": empty token`},
		{"queue filter twice", QueueConfig{Stream: "S", Durable: "d", FilterSubjects: []string{"a", "a"}}.Validate(), `listed twice`},
		{"queue wildcard inside token", QueueConfig{Stream: "S", Durable: "d", FilterSubjects: []string{"a.b*"}}.Validate(), `whole token`},
		{"queue > not last", QueueConfig{Stream: "S", Durable: "d", FilterSubjects: []string{"a.>.b"}}.Validate(), `must be the last token`},
		{"queue negative ack wait", QueueConfig{Stream: "S", Durable: "d", AckWait: -1}.Validate(), `AckWait`},
		{"queue negative max ack pending", QueueConfig{Stream: "S", Durable: "d", MaxAckPending: -1}.Validate(), `MaxAckPending`},
		{"queue bad start", QueueConfig{Stream: "S", Durable: "d", Start: brokers.StartMode(7)}.Validate(), `Start: unknown mode 7`},
		{"stream ok", StreamConfig{Stream: "S", Subjects: []string{"s.eu", "s.us"}}.Validate(), ""},
		{"stream no name", StreamConfig{}.Validate(), `nats stream config: Stream: required`},
		{"stream bad subject", StreamConfig{Stream: "S", Subjects: []string{"a b"}}.Validate(), `Subjects[0] "a b": contains whitespace`},
		{"stream negative threshold", StreamConfig{Stream: "S", InactiveThreshold: -time.Second}.Validate(), `InactiveThreshold`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			switch {
			case tt.want == "" && tt.err != nil:
				t.Fatalf("Validate: %v", tt.err)
			case tt.want != "" && (tt.err == nil || !strings.Contains(tt.err.Error(), tt.want)):
				t.Fatalf("Validate: %v, want an error containing %q", tt.err, tt.want)
			}
		})
	}
}

func TestDefaults(t *testing.T) {
	q := QueueConfig{Stream: "S", Durable: "d"}.withDefaults()
	if q.AckWait != DefaultAckWait || q.MaxAckPending != DefaultMaxAckPending || q.Key.KeyHeader != "key" ||
		q.Conn.URLs[0] != DefaultURL || q.Conn.Name != DefaultName || q.Conn.Logger == nil {
		t.Fatalf("queue defaults = %+v", q)
	}
	s := StreamConfig{Stream: "S"}.withDefaults()
	if s.InactiveThreshold != DefaultInactiveThreshold || s.Conn.RequestTimeout != DefaultRequestTimeout || s.Conn.ReconnectWait != DefaultReconnectWait {
		t.Fatalf("stream defaults = %+v", s)
	}
	if maxReconnects(0) != -1 || maxReconnects(5) != 5 {
		t.Fatal("MaxReconnects 0 must mean no cap")
	}
}

func TestConnConfigRedactsSecrets(t *testing.T) {
	// credentials in a URL are refused by Validate, but a config may be
	// printed before it is validated
	c := ConnConfig{URLs: []string{"nats://url-t0ken-abc@h:4222", "nats://bob:url-pw-def@h:4223"},
		User: "alice", Password: "s3cret-pw", Token: "t0ken-xyz", CredsFile: "/etc/nats/a.creds"}
	var buf bytes.Buffer
	slog.New(slog.NewTextHandler(&buf, nil)).Info("config", "conn", c)
	for _, out := range []string{buf.String(), c.String(), fmt.Sprint(c), fmt.Sprintf("%v %+v", c, c)} {
		if strings.Contains(out, "s3cret-pw") || strings.Contains(out, "t0ken-xyz") || strings.Contains(out, "url-t0ken-abc") || strings.Contains(out, "url-pw-def") {
			t.Fatalf("a secret shows: %s", out)
		}
		if !strings.Contains(out, "alice") {
			t.Fatalf("the user does not show: %s", out)
		}
	}
}

func FuzzValidateURL(f *testing.F) {
	for _, s := range []string{"nats://a:4222", "tls://u:pw@h:1", "nats://[::1]:4222", "x", "nats://a:0", "ws://h:80/p?q"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		err := ConnConfig{URLs: []string{raw}}.Validate()
		if err == nil {
			if strings.Contains(raw, "@") {
				t.Fatalf("accepted %q with credentials", raw)
			}
			return
		}
		// A password given in the URL must not come back in the error.
		if i, j := strings.Index(raw, "://"), strings.LastIndex(raw, "@"); i >= 0 && j > i+3 {
			userinfo := raw[i+3 : j]
			if k := strings.IndexByte(userinfo, ':'); k >= 0 && len(userinfo[k+1:]) >= 4 && strings.Contains(err.Error(), userinfo[k+1:]) {
				t.Fatalf("error %q repeats the password of %q", err, raw)
			}
		}
	})
}

func FuzzValidateSubject(f *testing.F) {
	for _, s := range []string{"a.b", "a.*", "a.>", "a..b", ">", "a.>.b", "*.x", "a b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if validateSubject(s) != nil {
			return
		}
		for i, tok := range strings.Split(s, ".") {
			if tok == "" || (strings.ContainsAny(tok, "*>") && len(tok) > 1) {
				t.Fatalf("accepted %q with bad token %d %q", s, i, tok)
			}
		}
	})
}
