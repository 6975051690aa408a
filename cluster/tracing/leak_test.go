package tracing

import (
	"context"
	"strings"
	"testing"
)

// an endpoint that carries credentials and is refused is
// printed whole.
func TestRefusedEndpointDoesNotPrintItsPassword(t *testing.T) {
	env := map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "grpc://user:s3cret@collector:4317"}
	_, err := Start(context.Background(), Options{Getenv: func(k string) string { return env[k] }})
	if err == nil {
		t.Fatal("no error")
	}
	if strings.Contains(err.Error(), "s3cret") {
		t.Fatalf("the error prints the endpoint's password: %v", err)
	}
}
