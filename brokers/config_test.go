package brokers_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/goccy/go-yaml"

	"github.com/drover-dev/drover/brokers"
)

// A Secret shows "[redacted]" however it is printed, alone or inside a
// struct or a pointer to one, and Reveal gives the value.
func TestSecretNeverPrints(t *testing.T) {
	const pw = "s3cr3t-Zq9"
	type section struct {
		User     string
		Password brokers.Secret `json:"password" yaml:"password"`
	}
	s := brokers.Secret(pw)
	sec := section{User: "u", Password: s}
	j, y := printedNowhere(t, s, sec, []section{sec}, &sec, pw)
	if !strings.Contains(string(j), `"password":"[redacted]"`) || !strings.Contains(string(y), "password: '[redacted]'") && !strings.Contains(string(y), `password: "[redacted]"`) {
		t.Errorf("json %s / yaml %s", j, y)
	}
	if s.Reveal() != pw || brokers.Secret("").String() != "" || fmt.Sprint(brokers.Secret("")) != "" {
		t.Errorf("Reveal %q, unset prints %q", s.Reveal(), brokers.Secret("").String())
	}
}

// A SecretURL shows its secrets masked however it is printed, alone or
// inside a struct or a pointer to one, and Reveal gives the value.
func TestSecretURLMasksItsSecrets(t *testing.T) {
	const pw, tok = "pw-Zq9secret", "tok-Zq9secret"
	type section struct {
		URL brokers.SecretURL `json:"url" yaml:"url"`
	}
	u := brokers.SecretURL("nats://u:" + pw + "@h:1, nats://" + tok + "@h:2")
	sec := section{URL: u}
	j, _ := printedNowhere(t, u, sec, []section{sec}, &sec, pw, tok)
	if want := "nats://u:xxxxx@h:1, nats://xxxxx@h:2"; u.String() != want || !strings.Contains(string(j), want) {
		t.Errorf("String %q, json %s; want %q", u.String(), j, want)
	}
	if u.Reveal() != string(u) {
		t.Errorf("Reveal %q", u.Reveal())
	}
}

func TestFieldErrors(t *testing.T) {
	var e brokers.FieldErrors
	if e.Err("kafka config") != nil {
		t.Fatal("no problem, yet an error")
	}
	e.Add("brokers[1]", "%q must be host:port", "h")
	e.Add("", "unusable")
	err := fmt.Errorf("open: %w", e.Err("kafka config"))
	if got, want := err.Error(), "open: kafka config: brokers[1]: \"h\" must be host:port\nunusable"; got != want {
		t.Errorf("error %q, want %q", got, want)
	}
	var fes brokers.FieldErrors
	if !errors.As(err, &fes) || len(fes) != 2 || fes[0].Path != "brokers[1]" {
		t.Errorf("errors.As found %v", fes)
	}
}

// printedNowhere prints value (a secret) and sec (a struct holding it, as a
// value, in a slice and through a pointer) with every fmt verb, as JSON,
// YAML and slog attributes, and fails when any output shows one of the
// secrets, as they are or hex-encoded. It returns the JSON and YAML of
// sec.
func printedNowhere(t *testing.T, value, sec, inSlice, ptr any, secrets ...string) (j, y []byte) {
	t.Helper()
	var outs []string
	for _, f := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x", "%X", "%10.3s"} {
		outs = append(outs, fmt.Sprintf(f, value), fmt.Sprintf(f, sec), fmt.Sprintf(f, inSlice), fmt.Sprintf(f, ptr))
	}
	j, err := json.Marshal(sec)
	if err != nil {
		t.Fatal(err)
	}
	y, err = yaml.Marshal(sec)
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	for _, h := range []slog.Handler{slog.NewTextHandler(&logs, nil), slog.NewJSONHandler(&logs, nil)} {
		slog.New(h).Info("x", "secret", value, "section", sec)
	}
	outs = append(outs, string(j), string(y), logs.String())
	for _, out := range outs {
		for _, s := range secrets {
			if strings.Contains(out, s) || strings.Contains(out, fmt.Sprintf("%x", s)) || strings.Contains(out, fmt.Sprintf("%X", s)) {
				t.Fatalf("secret printed: %s", out)
			}
		}
	}
	return j, y
}
