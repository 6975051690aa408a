package awsutil

import (
	"context"
	"strings"
	"testing"
	"time"
)

func TestLoadStaticCredentialsAndRegionHint(t *testing.T) {
	t.Setenv("AWS_REGION", "")
	t.Setenv("AWS_DEFAULT_REGION", "")
	t.Setenv("AWS_CONFIG_FILE", "/nonexistent")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
	l, err := Load(context.Background(), Settings{RegionHint: "eu-west-1", AccessKeyID: "AK", SecretAccessKey: "shh", ResponseHeaderTimeout: 7 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if l.Config.Region != "eu-west-1" || l.Credentials != "static" || l.Transport.ResponseHeaderTimeout != 7*time.Second {
		t.Fatalf("loaded %+v region %q", l, l.Config.Region)
	}
	c, err := l.Config.Credentials.Retrieve(context.Background())
	if err != nil || c.AccessKeyID != "AK" || c.SecretAccessKey != "shh" {
		t.Fatalf("credentials %+v %v", c, err)
	}
	l, err = Load(context.Background(), Settings{Region: "us-east-2", RegionHint: "eu-west-1"})
	if err != nil || l.Config.Region != "us-east-2" || l.Credentials != "default chain" {
		t.Fatalf("explicit region: %+v %v", l.Config.Region, err)
	}
}

func TestLoadWithoutRegionNamesIt(t *testing.T) {
	t.Setenv("AWS_REGION", "")
	t.Setenv("AWS_DEFAULT_REGION", "")
	t.Setenv("AWS_CONFIG_FILE", "/nonexistent")
	_, err := Load(context.Background(), Settings{})
	if err == nil || !strings.HasPrefix(err.Error(), "Region: required") {
		t.Fatalf("err = %v", err)
	}
}
