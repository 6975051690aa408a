package node_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"testing"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/drover-dev/drover/actors"
	"github.com/drover-dev/drover/cluster/config"
	"github.com/drover-dev/drover/cluster/node"
	"github.com/drover-dev/drover/internal/syncbuf"
)

// secretsNATS starts an embedded JetStream server that wants the given
// credentials (a token when user is ""), with the stream SEC on subject
// sec, and returns host:port.
func secretsNATS(t *testing.T, user, password string) string {
	t.Helper()
	opts := e2eNATSOptions(t)
	var connOpt natsgo.Option
	if user == "" {
		opts.Authorization = password
		connOpt = natsgo.Token(password)
	} else {
		opts.Username, opts.Password = user, password
		connOpt = natsgo.UserInfo(user, password)
	}
	s := e2eRunNATS(t, opts)
	addr := strings.TrimPrefix(s.ClientURL(), "nats://")
	nc, err := natsgo.Connect("nats://"+addr, connOpt)
	if err != nil {
		t.Fatalf("connect to the embedded NATS server: %v", err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "SEC", Subjects: []string{"sec"}}); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		if _, err := js.Publish(ctx, "sec", []byte(fmt.Sprintf(`{"id": %d}`, i))); err != nil {
			t.Fatal(err)
		}
	}
	return addr
}

// Issue 10, item 3: secrets in store and broker URLs, given through
// ${env:} in every form they take, never show in a running node's logs,
// its tree (Tree and GET /debug/tree), its events (GET /debug/events), /metrics or its printed config —
// nor in the error of a node that cannot start.
func TestSecretsNeverPrintE2E(t *testing.T) {
	// a fresh database for each run, the password put in as form says;
	// the throwaway server trusts every connection: any password does
	storeURL := func(t *testing.T, form, password string) string {
		pg, err := url.Parse(e2ePG.URL(t))
		if err != nil {
			t.Fatal(err)
		}
		user := "postgres"
		if pg.User != nil {
			user = pg.User.Username()
		}
		if form == "userinfo" {
			pg.User = url.UserPassword(user, password)
			return pg.String()
		}
		pg.User = url.User(user)
		q := pg.Query()
		q.Set("password", password)
		pg.RawQuery = q.Encode()
		return pg.String()
	}

	pwNATS := secretsNATS(t, "drover", "nats-pw-secret-3")
	tokNATS := secretsNATS(t, "", "nats-tok-secret-4")

	const sources = `
sources:
  - name: by-password
    type: nats
    records: {key: id}
    nats: {url: '${env:DROVER_T_NATS_A}', stream: SEC, mode: queue, consumer: '${env:DROVER_T_CONSUMER}'}
  - name: by-token
    type: nats
    records: {key: id}
    nats: {url: '${env:DROVER_T_NATS_B}', stream: SEC, mode: stream}
`
	for i, run := range []struct {
		name             string
		store, natsA     string
		natsB            string
		secrets          []string
		wantStartFailure string // "" the node runs
		// wantRetrying names the source whose broker refuses the
		// credentials: the node runs, that source (or its unit) shows
		// retrying with the broker's error, the other source applies.
		wantRetrying string
	}{
		{
			name:    "userinfo password, NATS user:password list and token",
			store:   "userinfo pg-pw-secret-1",
			natsA:   "nats://drover:nats-pw-secret-3@" + pwNATS + ", nats://drover:nats-pw-secret-3@" + pwNATS,
			natsB:   "nats://nats-tok-secret-4@" + tokNATS,
			secrets: []string{"pg-pw-secret-1", "nats-pw-secret-3", "nats-tok-secret-4"},
		},
		{
			name:    "?password= and the token server read as a stream",
			store:   "query pg-qp-secret-2",
			natsA:   "nats://drover:nats-pw-secret-3@" + pwNATS,
			natsB:   "nats://nats-tok-secret-4@" + tokNATS + ",nats://nats-tok-secret-4@" + tokNATS,
			secrets: []string{"pg-qp-secret-2", "nats-pw-secret-3", "nats-tok-secret-4"},
		},
		{
			name:         "a wrong NATS password",
			store:        "userinfo pg-pw-secret-1",
			natsA:        "nats://drover:nats-wrong-secret-5@" + pwNATS,
			natsB:        "nats://nats-tok-secret-4@" + tokNATS,
			secrets:      []string{"pg-pw-secret-1", "nats-wrong-secret-5", "nats-tok-secret-4"},
			wantRetrying: "by-password",
		},
		{
			name:         "a wrong NATS token",
			store:        "userinfo pg-pw-secret-1",
			natsA:        "nats://drover:nats-pw-secret-3@" + pwNATS,
			natsB:        "nats://nats-wrong-secret-6@" + tokNATS,
			secrets:      []string{"pg-pw-secret-1", "nats-pw-secret-3", "nats-wrong-secret-6"},
			wantRetrying: "by-token",
		},
		{
			name:             "a store nobody listens on",
			store:            "postgres://drover:pg-pw-secret-7@127.0.0.1:1/d?connect_timeout=5",
			natsA:            "nats://drover:nats-pw-secret-3@" + pwNATS,
			natsB:            "nats://nats-tok-secret-4@" + tokNATS,
			secrets:          []string{"pg-pw-secret-7"},
			wantStartFailure: "store:",
		},
	} {
		t.Run(run.name, func(t *testing.T) {
			store := run.store
			if form, pw, ok := strings.Cut(store, " "); ok {
				store = storeURL(t, form, pw)
			}
			t.Setenv("DROVER_T_STORE", store)
			t.Setenv("DROVER_T_CONSUMER", fmt.Sprintf("c%d", i))
			t.Setenv("DROVER_T_NATS_A", run.natsA)
			t.Setenv("DROVER_T_NATS_B", run.natsB)
			res := e2eResult{Logs: &syncbuf.Buffer{}}
			log := slog.New(slog.NewTextHandler(res.Logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
			cfg, err := config.Parse([]byte(strings.Replace(string(e2eConfigYAML("sec-node", "${env:DROVER_T_STORE}", "")), "sources:\n", "", 1)+sources), config.Options{})
			if err != nil {
				t.Fatal(err)
			}
			res.Configs = []*config.Config{cfg}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			n, err := node.Start(ctx, cfg, node.Options{Logger: log, Handlers: map[string]actors.Handler{"audit": node.AuditHandler}})
			if run.wantStartFailure != "" {
				if err == nil {
					n.Close()
					t.Fatalf("the node started")
				}
				if !strings.Contains(err.Error(), run.wantStartFailure) {
					t.Errorf("start error %q does not name %s", err, run.wantStartFailure)
				}
				where := map[string]string{"start error": err.Error(), "logs": res.Logs.String(), "config": cfg.String() + fmt.Sprintf("%+v %#v", cfg, cfg.Redacted())}
				for what, text := range where {
					for _, s := range run.secrets {
						if strings.Contains(text, s) {
							t.Errorf("the secret %s appears in the %s: %s", s, what, text)
						}
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("start: %v", err)
			}
			defer n.Close()
			if run.wantRetrying == "" {
				// both sources read the three messages: the credentials work
				err = e2eWaitFor(ctx, 20*time.Millisecond, 30*time.Second, func() (bool, string) {
					applied := e2eApplied(n.Tree(), map[string]int{"by-password": 3, "by-token": 3})
					return applied == 6, fmt.Sprintf("%d of 6 applied", applied)
				})
			} else {
				// the refused source retries with the broker's error while
				// the other one applies its three messages
				other := "by-password"
				if run.wantRetrying == other {
					other = "by-token"
				}
				err = e2eWaitFor(ctx, 20*time.Millisecond, 30*time.Second, func() (bool, string) {
					tr := n.Tree()
					applied := e2eApplied(tr, map[string]int{other: 3})
					shown := ""
					for _, s := range tr.Sources {
						if s.Name != run.wantRetrying {
							continue
						}
						if s.State == actors.StateRetrying {
							shown = s.Error
						}
						for _, u := range s.Units {
							if u.State == actors.StateRetrying {
								shown = u.LastError
							}
						}
					}
					ok := applied == 3 && strings.Contains(strings.ToLower(shown), "authorization")
					return ok, fmt.Sprintf("%s applied %d of 3; %s shows %q", other, applied, run.wantRetrying, shown)
				})
			}
			if err != nil {
				tree, _ := json.MarshalIndent(n.Tree(), "", "  ")
				t.Fatalf("%v\ntree: %s\nlogs: %s", err, tree, res.Logs)
			}
			tree, err := json.Marshal(n.Tree())
			if err != nil {
				t.Fatal(err)
			}
			res.Trees = [][]byte{tree}
			res.DebugTree = e2eGet(ctx, t, "http://"+n.DebugAddr()+"/debug/tree")
			res.DebugEvents = e2eGet(ctx, t, "http://"+n.DebugAddr()+"/debug/events")
			res.Metrics = e2eGet(ctx, t, "http://"+n.DebugAddr()+"/metrics")
			sctx, scancel := context.WithTimeout(ctx, 20*time.Second)
			defer scancel()
			if err := n.Shutdown(sctx); err != nil {
				t.Errorf("shutdown: %v", err)
			}
			for _, s := range run.secrets {
				e2eNoSecret(t, res, s)
			}
		})
	}
}
