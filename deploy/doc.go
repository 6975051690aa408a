// Package deploy holds drover's container image (Dockerfile) and Kubernetes
// manifests; its test checks that they stay consistent with the binary's
// configuration and the shipping rules (static binary, non-root, secrets
// from Secrets, readiness on /readyz).
package deploy
