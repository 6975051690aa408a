package config

import "strings"

// FieldError is one problem of a config, with the path of the field it is
// about: "sources[1].kafka.topic". Problems of the whole file (YAML syntax,
// a document that is not a mapping) have the path "(root)"; a file Load
// cannot read has "(file)". Msg never contains a secret's value.
type FieldError struct {
	Path string
	Msg  string
}

func (e FieldError) Error() string { return e.Path + ": " + e.Msg }

// Errors is every problem Parse found, in the order of the file, then of
// the checks. Parse and Validate return it as their error.
type Errors []FieldError

func (e Errors) Error() string {
	var b strings.Builder
	for i, fe := range e {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(fe.Error())
	}
	return b.String()
}

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
