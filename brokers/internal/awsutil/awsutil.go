package awsutil

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/smithy-go/logging"
)

// Settings are the parts of an adapter's Config that reach the SDK.
type Settings struct {
	// Region; when empty, RegionHint, then the default chain (AWS_REGION,
	// shared config) decide.
	Region     string
	RegionHint string // e.g. the region in a queue URL or stream ARN
	// AccessKeyID, SecretAccessKey and SessionToken are static
	// credentials; without an AccessKeyID the default chain is used.
	AccessKeyID, SecretAccessKey, SessionToken string
	// ResponseHeaderTimeout bounds the wait for a response's headers (it
	// must exceed the longest long poll).
	ResponseHeaderTimeout time.Duration
}

// Loaded is a configuration ready for a service client.
type Loaded struct {
	Config aws.Config
	// Transport is the HTTP transport of Config.HTTPClient: the adapter's
	// own, to close its idle connections on Close.
	Transport *http.Transport
	// Credentials says where the credentials come from, for logs: "static"
	// or "default chain" (never the secret).
	Credentials string
}

// Load builds the SDK configuration. The error names what is missing and
// carries no SDK type.
func Load(ctx context.Context, s Settings) (Loaded, error) {
	opts := []func(*awsconfig.LoadOptions) error{
		awsconfig.WithHTTPClient(awshttp.NewBuildableClient()),
		awsconfig.WithLogger(logging.Nop{}),
	}
	region := s.Region
	if region == "" {
		region = s.RegionHint
	}
	if region != "" {
		opts = append(opts, awsconfig.WithRegion(region))
	}
	l := Loaded{Credentials: "default chain"}
	if s.AccessKeyID != "" {
		l.Credentials = "static"
		opts = append(opts, awsconfig.WithCredentialsProvider(
			credentials.NewStaticCredentialsProvider(s.AccessKeyID, s.SecretAccessKey, s.SessionToken)))
	}
	cfg, err := awsconfig.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return l, fmt.Errorf("load AWS config: %w", Flatten(err))
	}
	if cfg.Region == "" {
		return l, errors.New("Region: required (set it, AWS_REGION, or a region in the shared config)")
	}
	l.Transport = transport(cfg.HTTPClient, s.ResponseHeaderTimeout)
	cfg.HTTPClient = &http.Client{Transport: l.Transport}
	l.Config = cfg
	return l, nil
}

func transport(c aws.HTTPClient, headerTimeout time.Duration) *http.Transport {
	var tr *http.Transport
	if bc, ok := c.(*awshttp.BuildableClient); ok {
		tr = bc.GetTransport()
	} else {
		tr = http.DefaultTransport.(*http.Transport).Clone()
	}
	tr.MaxIdleConnsPerHost = 64
	tr.ResponseHeaderTimeout = headerTimeout
	return tr
}

// Flatten keeps an error's text and drops its SDK types.
func Flatten(err error) error {
	if err == nil {
		return nil
	}
	return errors.New(err.Error())
}
