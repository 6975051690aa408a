package pubsub

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/drover-dev/drover/brokers"
)

// Validate names every problem by its path in the config file's names, in
// the order of the fields.
func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		want []string
	}{
		{"ok", Config{Project: "p", Subscription: "orders"}, nil},
		{"full path", Config{Subscription: "projects/p/subscriptions/orders"}, nil},
		{"full path, same project", Config{Project: "p", Subscription: "projects/p/subscriptions/orders"}, nil},
		{"emulator", Config{Project: "p", Subscription: "orders", Endpoint: "127.0.0.1:8085", Insecure: true}, nil},
		{"empty", Config{}, []string{"project: required (or give subscription as projects/<project>/subscriptions/<id>)", "subscription: required"}},
		{"short id", Config{Project: "p", Subscription: "s1"}, []string{
			`subscription: "s1" must be an ID of 3-255 letters, digits or - _ . ~ + %, starting with a letter and not with goog`}},
		{"goog", Config{Project: "p", Subscription: "googsub"}, []string{
			`subscription: "googsub" must be an ID of 3-255 letters, digits or - _ . ~ + %, starting with a letter and not with goog`}},
		{"bad path", Config{Project: "p", Subscription: "p/orders"}, []string{`subscription: "p/orders" must be an ID or projects/<project>/subscriptions/<id>`}},
		{"other project", Config{Project: "q", Subscription: "projects/p/subscriptions/orders"}, []string{`project: "q": the subscription path names project "p"`}},
		{"bad project", Config{Project: "-p", Subscription: "orders"}, []string{`project: "-p" must be a project ID`}},
		{"endpoint scheme", Config{Project: "p", Subscription: "orders", Endpoint: "http://e:1"}, []string{`endpoint: "http://e:1" must be host:port, without a URL scheme`}},
		{"endpoint no port", Config{Project: "p", Subscription: "orders", Endpoint: "e"}, []string{`endpoint: "e" must be host:port`}},
		{"endpoint port", Config{Project: "p", Subscription: "orders", Endpoint: "e:0"}, []string{`endpoint: "e:0": port "0" must be a number from 1 to 65535`}},
		{"endpoint host", Config{Project: "p", Subscription: "orders", Endpoint: ":1"}, []string{`endpoint: ":1": host is missing`}},
		{"endpoint bad host", Config{Project: "p", Subscription: "orders", Endpoint: "a@b:1"}, []string{`endpoint: "a@b:1": "a@b" is not a host name or IP address`}},
		{"insecure alone", Config{Project: "p", Subscription: "orders", Insecure: true}, []string{"insecure: set only with endpoint (an emulator's host:port)"}},
		{"insecure with credentials", Config{Project: "p", Subscription: "orders", Endpoint: "e:1", Insecure: true, CredentialsFile: "/c.json"}, []string{
			"credentials_file: not used with insecure (no authentication)"}},
		{"max outstanding", Config{Project: "p", Subscription: "orders", MaxMessages: MaxPullMessages + 1}, []string{"max_outstanding: must be at most 1000, not 1001"}},
		{"negative", Config{Project: "p", Subscription: "orders", MaxMessages: -1, PollInterval: -time.Second, RequestTimeout: -time.Second}, []string{
			"max_outstanding: must not be negative, not -1", "poll_interval: must not be negative, not -1s", "request_timeout: must not be negative, not -1s"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cfg.Validate()
			var got []string
			if err != nil {
				var fes brokers.FieldErrors
				if !errors.As(err, &fes) || !strings.HasPrefix(err.Error(), "pubsub: ") {
					t.Fatalf("error %v: not pubsub: FieldErrors", err)
				}
				for _, fe := range fes {
					got = append(got, fe.Error())
				}
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("problems\n got %q\nwant %q", got, tt.want)
			}
		})
	}
}
