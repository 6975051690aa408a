// Package deploy holds drover's container image (Dockerfile), Kubernetes
// manifests and a KEDA ScaledObject (keda/) that scales them on
// drover_source_lag_seconds; its test checks that they stay consistent with the binary's
// configuration and the shipping rules (static binary, non-root, secrets
// from Secrets, readiness on /readyz).
package deploy
