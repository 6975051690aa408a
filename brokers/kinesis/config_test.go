package kinesis

import (
	"errors"
	"testing"

	"github.com/aws/smithy-go"

	"github.com/drover-dev/drover/brokers/awstest"
)

func TestConfigValidate(t *testing.T) {
	ok := Config{StreamName: "events"}
	awstest.CheckValidate(t, "kinesis", ok, []struct {
		Name  string
		Edit  func(*Config)
		Field string // "" = valid
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
	})
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
	awstest.CheckSecretsHidden(t, c)
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
		awstest.CheckTranslated(t, tc.err, translate(OpFetch, tc.err), OpFetch, tc.retryable)
	}
}
