package config

import (
	"reflect"
	"slices"
)

// Diff is what a reload changes: the names of the sources added, removed
// and changed (any setting of theirs differs), each in file order (removed:
// in the old file's order).
type Diff struct {
	Added   []string `json:"added,omitempty"`
	Removed []string `json:"removed,omitempty"`
	Changed []string `json:"changed,omitempty"`
}

// Empty reports whether the diff changes nothing.
func (d Diff) Empty() bool { return len(d.Added)+len(d.Removed)+len(d.Changed) == 0 }

// Compare tells what a running node with configuration old must change to
// run next, a configuration Parse returned. Only sources change on a
// running node: a difference in any other section (node, cluster, store,
// log) is an error naming each such field, and the Diff is then empty.
func Compare(old, next *Config) (Diff, error) {
	var errs Errors
	ov, nv := reflect.ValueOf(old).Elem(), reflect.ValueOf(next).Elem()
	t := ov.Type()
	for i := range t.NumField() {
		f := t.Field(i)
		name := yamlName(f)
		if name == "" || name == "sources" {
			continue
		}
		fixedFields(name, ov.Field(i), nv.Field(i), &errs)
	}
	if len(errs) > 0 {
		return Diff{}, errs
	}
	var d Diff
	before := map[string]Source{}
	for _, s := range old.Sources {
		before[s.Name] = s
	}
	now := map[string]bool{}
	for _, s := range next.Sources {
		now[s.Name] = true
		o, ok := before[s.Name]
		switch {
		case !ok:
			d.Added = append(d.Added, s.Name)
		case !reflect.DeepEqual(o, s):
			d.Changed = append(d.Changed, s.Name)
		}
	}
	for _, s := range old.Sources {
		if !now[s.Name] {
			d.Removed = append(d.Removed, s.Name)
		}
	}
	return d, nil
}

// fixedFields adds an error for each field of section (path) that differs
// between a and b. Values are not shown: some are secrets.
func fixedFields(path string, a, b reflect.Value, errs *Errors) {
	if reflect.DeepEqual(a.Interface(), b.Interface()) {
		return
	}
	if a.Kind() == reflect.Struct {
		t := a.Type()
		before := len(*errs)
		for i := range t.NumField() {
			if name := yamlName(t.Field(i)); name != "" {
				fixedFields(path+"."+name, a.Field(i), b.Field(i), errs)
			}
		}
		if len(*errs) > before {
			return
		}
	}
	*errs = append(*errs, FieldError{Path: path, Msg: "changed, but it cannot change on a running node: restart the node to change it (a reload changes only sources)"})
}

// SourceByName is the source of c named name.
func (c *Config) SourceByName(name string) (Source, bool) {
	i := slices.IndexFunc(c.Sources, func(s Source) bool { return s.Name == name })
	if i < 0 {
		return Source{}, false
	}
	return c.Sources[i], true
}
