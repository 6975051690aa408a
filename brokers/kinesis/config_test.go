package kinesis

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/aws/smithy-go"

	"github.com/drover-dev/drover/brokers"
)

func TestConfigValidate(t *testing.T) {
	ok := Config{StreamName: "events"}
	for _, tc := range []struct {
		name  string
		edit  func(*Config)
		field string
	}{
		{"name", func(*Config) {}, ""},
		{"arn", func(c *Config) {
			c.StreamName, c.StreamARN = "", "arn:aws:kinesis:eu-west-1:123456789012:stream/events"
		}, ""},
		{"none", func(c *Config) { c.StreamName = "" }, "stream"},
		{"bad arn", func(c *Config) { c.StreamARN = "arn:aws:sqs:eu-west-1:1:q" }, "stream_arn"},
		{"endpoint", func(c *Config) { c.Endpoint = "localhost:4567" }, "endpoint"},
		{"secret alone", func(c *Config) { c.SecretAccessKey = "s" }, "access_key_id"},
		{"key alone", func(c *Config) { c.AccessKeyID = "a" }, "secret_access_key"},
		{"token alone", func(c *Config) { c.SessionToken = "t" }, "session_token"},
		{"poll", func(c *Config) { c.PollInterval = -1 }, "poll_interval"},
		{"backoff", func(c *Config) { c.ThrottleBackoff = MaxThrottleBackoff + 1 }, "throttle_backoff"},
		{"max records", func(c *Config) { c.MaxRecords = 10001 }, "max_records"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := ok
			tc.edit(&c)
			err := c.Validate()
			if tc.field == "" {
				if err != nil {
					t.Fatalf("valid config: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), "kinesis: "+tc.field+":") {
				t.Fatalf("error %v, want one naming %s", err, tc.field)
			}
		})
	}
	d := ok.withDefaults()
	if d.PollInterval != DefaultPollInterval || d.ThrottleBackoff != DefaultThrottleBackoff || d.MaxRecords != 10000 || d.Logger == nil {
		t.Fatalf("defaults %+v", d)
	}
	if got := regionFromARN("arn:aws:kinesis:eu-west-1:123456789012:stream/events"); got != "eu-west-1" {
		t.Fatalf("region from ARN %q", got)
	}
}

func TestConfigNeverShowsSecret(t *testing.T) {
	c := Config{StreamName: "s", AccessKeyID: "AKIDVISIBLE", SecretAccessKey: "s3cr3t-value", SessionToken: "tok3n-value"}
	var logged bytes.Buffer
	slog.New(slog.NewJSONHandler(&logged, nil)).Info("config", "cfg", c)
	for _, out := range []string{fmt.Sprint(c), fmt.Sprintf("%+v", c), fmt.Sprintf("%#v", c), logged.String()} {
		if strings.Contains(out, "s3cr3t") || strings.Contains(out, "tok3n") || !strings.Contains(out, "AKIDVISIBLE") {
			t.Fatalf("secret shown or key id missing: %s", out)
		}
	}
}

func TestTranslate(t *testing.T) {
	for _, tc := range []struct {
		err       error
		retryable bool
	}{
		{&smithy.GenericAPIError{Code: "ResourceNotFoundException", Fault: smithy.FaultClient}, false},
		{&smithy.GenericAPIError{Code: "InvalidArgumentException", Fault: smithy.FaultClient}, false},
		{&smithy.GenericAPIError{Code: "ProvisionedThroughputExceededException", Fault: smithy.FaultClient}, true},
		{&smithy.GenericAPIError{Code: "LimitExceededException", Fault: smithy.FaultClient}, true},
		{&smithy.GenericAPIError{Code: "InternalFailure", Fault: smithy.FaultServer}, true},
		{errors.New("dial tcp: connection refused"), true},
	} {
		err := translate(OpFetch, tc.err)
		var be *brokers.Error
		if !errors.As(err, &be) || be.Op != OpFetch || be.Retryable != tc.retryable {
			t.Errorf("%v: got %#v, want retryable %v", tc.err, err, tc.retryable)
		}
		var ae smithy.APIError
		if errors.As(err, &ae) {
			t.Errorf("%v: an SDK type leaks through", tc.err)
		}
	}
}
