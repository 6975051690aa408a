package awstest

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

// This file holds the checks the SQS and Kinesis adapters' config and
// error tests share.

// CheckValidate runs a table for a config's Validate on copies of ok, a
// valid config. Each case's Edit changes the copy; Field is the field whose
// problem Validate must then report as "PREFIX: FIELD:", or "" when the
// edited config is valid.
func CheckValidate[C interface{ Validate() error }](t *testing.T, prefix string, ok C, cases []struct {
	Name  string
	Edit  func(*C)
	Field string
}) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.Name, func(t *testing.T) {
			c := ok
			tc.Edit(&c)
			err := c.Validate()
			if tc.Field == "" {
				if err != nil {
					t.Fatalf("valid config: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), prefix+": "+tc.Field+":") {
				t.Fatalf("error %v, want one naming %s", err, tc.Field)
			}
		})
	}
}

// CheckSecretsHidden checks that c, a config whose AccessKeyID is
// "AKIDVISIBLE" and whose secret key and session token contain "s3cr3t"
// and "tok3n", shows the key id and neither secret, printed with fmt
// (%v, %+v, %#v) or logged with slog.
func CheckSecretsHidden(t *testing.T, c any) {
	t.Helper()
	var logged bytes.Buffer
	slog.New(slog.NewJSONHandler(&logged, nil)).Info("config", "cfg", c)
	for _, out := range []string{fmt.Sprint(c), fmt.Sprintf("%+v", c), fmt.Sprintf("%#v", c), logged.String()} {
		if strings.Contains(out, "s3cr3t") || strings.Contains(out, "tok3n") {
			t.Fatalf("secret shown: %s", out)
		}
		if !strings.Contains(out, "AKIDVISIBLE") {
			t.Fatalf("access key id missing: %s", out)
		}
	}
}

// CheckTranslated checks an adapter's translation err of the SDK error
// from: a *brokers.Error of op with the retryability wanted, through
// whose chain no smithy.APIError is reachable.
func CheckTranslated(t *testing.T, from, err error, op string, retryable bool) {
	t.Helper()
	var be *brokers.Error
	if !errors.As(err, &be) || be.Op != op || be.Retryable != retryable {
		t.Errorf("%v: got %#v, want retryable %v", from, err, retryable)
	}
	var ae smithy.APIError
	if errors.As(err, &ae) {
		t.Errorf("%v: an SDK type leaks through %v", from, err)
	}
}
