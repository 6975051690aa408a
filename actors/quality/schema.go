package quality

import (
	"fmt"
	"strings"
)

// Type is a declared field type of a schema.
type Type string

// The declared types. ParseSchema also accepts the aliases number (float),
// string (text) and the type json, which any JSON value fits.
const (
	TypeInt       Type = "int"       // a JSON number with an integral value (1, -3, 2.0, 1e3), any size
	TypeFloat     Type = "float"     // any JSON number
	TypeText      Type = "text"      // a JSON string
	TypeBool      Type = "bool"      // true or false
	TypeJSON      Type = "json"      // any JSON value
	TypeObject    Type = "object"    // a JSON object
	TypeArray     Type = "array"     // a JSON array
	TypeTimestamp Type = "timestamp" // a JSON string holding an RFC 3339 time
)

var typeNames = map[string]Type{
	"int": TypeInt, "float": TypeFloat, "number": TypeFloat, "text": TypeText, "string": TypeText,
	"bool": TypeBool, "json": TypeJSON, "object": TypeObject, "array": TypeArray, "timestamp": TypeTimestamp,
}

const typeList = "int, float, number, text, string, bool, json, object, array, timestamp"

// Field is one declared field.
type Field struct {
	Name string
	Type Type
}

// Schema is the declared types of a source's top-level fields, in the
// order they were declared. A nil Schema declares nothing.
type Schema []Field

// ParseSchema parses "name:type, name:type, …" (records.schema,
// architecture §8 and §9).
// Blanks around names and types are ignored; an empty string is an empty
// schema. The error names the first bad entry by its position and text.
func ParseSchema(s string) (Schema, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	entries := strings.Split(s, ",")
	out := make(Schema, 0, len(entries))
	seen := make(map[string]bool, len(entries))
	for i, e := range entries {
		at := fmt.Sprintf("schema entry %d %q", i+1, strings.TrimSpace(e))
		name, typ, ok := strings.Cut(e, ":")
		name, typ = strings.TrimSpace(name), strings.TrimSpace(typ)
		switch {
		case strings.TrimSpace(e) == "":
			return nil, fmt.Errorf("%s: empty entry", at)
		case !ok:
			return nil, fmt.Errorf("%s: want name:type", at)
		case name == "":
			return nil, fmt.Errorf("%s: empty field name", at)
		case typ == "":
			return nil, fmt.Errorf("%s: empty type (want one of %s)", at, typeList)
		case seen[name]:
			return nil, fmt.Errorf("%s: field %q declared twice", at, name)
		}
		t, ok := typeNames[typ]
		if !ok {
			return nil, fmt.Errorf("%s: unknown type %q (want one of %s)", at, typ, typeList)
		}
		seen[name] = true
		out = append(out, Field{Name: name, Type: t})
	}
	return out, nil
}

// String formats the schema as ParseSchema reads it, aliases resolved.
func (s Schema) String() string {
	var b strings.Builder
	for i, f := range s {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(f.Name)
		b.WriteByte(':')
		b.WriteString(string(f.Type))
	}
	return b.String()
}

// Lookup returns the declared type of a field.
func (s Schema) Lookup(name string) (Type, bool) {
	for _, f := range s {
		if f.Name == name {
			return f.Type, true
		}
	}
	return "", false
}
