package sqs

import (
	"errors"
	"strings"
	"testing"

	"github.com/aws/smithy-go"

	"github.com/drover-dev/drover/brokers"
	"github.com/drover-dev/drover/brokers/awstest"
)

func TestConfigValidate(t *testing.T) {
	ok := Config{QueueURL: "http://127.0.0.1:4566/000000000000/q"}
	awstest.CheckValidate(t, "sqs", ok, []struct {
		Name  string
		Edit  func(*Config)
		Field string // "" = valid
	}{
		{"url", func(*Config) {}, ""},
		{"name", func(c *Config) { c.QueueURL, c.QueueName = "", "jobs" }, ""},
		{"none", func(c *Config) { c.QueueURL = "" }, "queue_url"},
		{"bad url", func(c *Config) { c.QueueURL = "ftp://x/q" }, "queue_url"},
		{"endpoint scheme", func(c *Config) { c.Endpoint = "127.0.0.1:4566" }, "endpoint"},
		{"endpoint ok", func(c *Config) { c.Endpoint = "https://sqs.eu-west-1.amazonaws.com" }, ""},
		{"secret alone", func(c *Config) { c.SecretAccessKey = "s" }, "access_key_id"},
		{"key alone", func(c *Config) { c.AccessKeyID = "a" }, "secret_access_key"},
		{"token alone", func(c *Config) { c.SessionToken = "t" }, "session_token"},
		{"wait", func(c *Config) { c.WaitTime = 21e9 }, "wait"},
		{"visibility", func(c *Config) { c.VisibilityTimeout = -1 }, "visibility_timeout"},
		{"max", func(c *Config) { c.MaxMessages = 11 }, "max_messages"},
	})
	d := ok.withDefaults()
	if d.WaitTime != DefaultWaitTime || d.MaxMessages != 10 || d.KeyAttribute != "key" || d.Logger == nil || d.VisibilityTimeout != DefaultVisibilityTimeout || DefaultVisibilityTimeout != 30e9 {
		t.Fatalf("defaults %+v", d)
	}
}

func TestConfigNeverShowsSecret(t *testing.T) {
	c := Config{QueueURL: "http://h/q", AccessKeyID: "AKIDVISIBLE", SecretAccessKey: "s3cr3t-value", SessionToken: "tok3n-value"}
	awstest.CheckSecretsHidden(t, c)
}

func TestRegionFromURL(t *testing.T) {
	for url, want := range map[string]string{
		"https://sqs.eu-west-1.amazonaws.com/123/q":   "eu-west-1",
		"https://us-east-2.queue.amazonaws.com/123/q": "us-east-2",
		"http://127.0.0.1:4566/000000000000/q":        "",
	} {
		if got := regionFromURL(url); got != want {
			t.Errorf("regionFromURL(%s) = %q, want %q", url, got, want)
		}
	}
}

// TestTranslate: SDK errors become *brokers.Error with the right
// retryability, and no SDK type is reachable through the chain.
func TestTranslate(t *testing.T) {
	for _, tc := range []struct {
		err       error
		retryable bool
		notFound  bool
	}{
		{&smithy.GenericAPIError{Code: "QueueDoesNotExist", Fault: smithy.FaultClient}, false, true},
		{&smithy.GenericAPIError{Code: "AWS.SimpleQueueService.NonExistentQueue", Fault: smithy.FaultClient}, false, true},
		{&smithy.GenericAPIError{Code: "ReceiptHandleIsInvalid", Fault: smithy.FaultClient}, false, false},
		{&smithy.GenericAPIError{Code: "RequestThrottled", Fault: smithy.FaultClient}, true, false},
		{&smithy.GenericAPIError{Code: "InternalError", Fault: smithy.FaultServer}, true, false},
		{&smithy.OperationError{ServiceID: "SQS", OperationName: "ReceiveMessage", Err: errors.New("connection refused")}, true, false},
	} {
		err := translate(OpReceive, tc.err)
		awstest.CheckTranslated(t, tc.err, err, OpReceive, tc.retryable)
		if brokers.Retryable(err) != tc.retryable {
			t.Errorf("%v: brokers.Retryable = %v, want %v", tc.err, !tc.retryable, tc.retryable)
		}
		if errors.Is(err, ErrQueueNotFound) != tc.notFound {
			t.Errorf("%v: errors.Is(ErrQueueNotFound) = %v", tc.err, !tc.notFound)
		}
		var oe *smithy.OperationError
		if errors.As(err, &oe) {
			t.Errorf("%v: an SDK type leaks through %v", tc.err, err)
		}
		if !strings.Contains(err.Error(), tc.err.Error()) {
			t.Errorf("%v: text lost: %v", tc.err, err)
		}
	}
}
