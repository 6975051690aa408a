package config

import (
	"strings"

	"github.com/drover-dev/drover/brokers"
)

// FieldError is one problem of a config, with the path of the field it is
// about: "sources[1].kafka.topic". Problems of the whole file (YAML syntax,
// a document that is not a mapping) have the path "(root)"; a file Load
// cannot read has "(file)". Msg never contains a secret's value. It is the
// adapters' brokers.FieldError, whose problems config prefixes with the
// section's path.
type FieldError = brokers.FieldError

// Errors is every problem Parse found, in the order of the file, then of
// the checks. Parse and Validate return it as their error.
type Errors brokers.FieldErrors

func (e Errors) Error() string { return brokers.FieldErrors(e).Error() }

// covers reports whether a problem was already reported at path or above
// it (so that a section of the wrong type is not also reported as missing
// its fields).
func (e Errors) covers(path string) bool {
	for _, fe := range e {
		if fe.Path == path || (strings.HasPrefix(path, fe.Path) && (path[len(fe.Path)] == '.' || path[len(fe.Path)] == '[')) {
			return true
		}
	}
	return false
}
