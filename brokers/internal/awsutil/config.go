package awsutil

import (
	"net/url"

	"github.com/drover-dev/drover/brokers"
)

// CheckURL reports at path a value that is not an http(s) URL with a host.
func CheckURL(e *brokers.FieldErrors, path, s string) {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		e.Add(path, "%q must be an http:// or https:// URL with a host", s)
	}
}

// CheckCredentials reports static credentials that are incomplete: a key
// id without its secret or the other way round, a session token without
// both.
func CheckCredentials(e *brokers.FieldErrors, accessKeyID string, secretAccessKey, sessionToken brokers.Secret) {
	switch {
	case accessKeyID != "" && secretAccessKey == "":
		e.Add("secret_access_key", "required with access_key_id")
	case accessKeyID == "" && secretAccessKey != "":
		e.Add("access_key_id", "required with secret_access_key")
	}
	if sessionToken != "" && accessKeyID == "" {
		e.Add("session_token", "needs access_key_id and secret_access_key")
	}
}
