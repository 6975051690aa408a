package config

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
)

// reachableStructs calls f with a pointer to every struct value reachable
// from v (an addressable value) through fields, pointers and slices.
func reachableStructs(v reflect.Value, f func(path string, ptr any)) {
	var walk func(path string, v reflect.Value)
	walk = func(path string, v reflect.Value) {
		switch v.Kind() {
		case reflect.Pointer:
			if !v.IsNil() {
				walk(path, v.Elem())
			}
		case reflect.Slice:
			for i := range v.Len() {
				walk(fmt.Sprintf("%s[%d]", path, i), v.Index(i))
			}
		case reflect.Struct:
			if v.CanAddr() && v.Addr().CanInterface() {
				f(path, v.Addr().Interface())
			}
			for i := range v.NumField() {
				if v.Type().Field(i).IsExported() {
					walk(path+"."+v.Type().Field(i).Name, v.Field(i))
				}
			}
		}
	}
	walk("", v)
}

// Every struct of a parsed config, printed through a pointer inside
// another value with any verb, shows no secret: fmt prints a pointer
// nested in a slice or a struct, with %s or %q, through a path that skips
// the methods of the Secret fields inside it, unless the struct formats
// itself.
func TestNoStructOfTheConfigPrintsASecret(t *testing.T) {
	c, errs := parse(t, secretYAML)
	if errs != nil {
		t.Fatal(errs)
	}
	all := append(secrets, gossipKey)
	n := 0
	reachableStructs(reflect.ValueOf(c).Elem(), func(path string, ptr any) {
		n++
		for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x", "%d"} {
			for _, out := range []string{fmt.Sprintf(verb, ptr), fmt.Sprintf(verb, []any{ptr}), fmt.Sprintf(verb, struct{ X any }{ptr})} {
				for _, s := range all {
					if strings.Contains(out, s) {
						t.Errorf("%s (%T) printed with %s shows a secret: %s", path, ptr, verb, out)
					}
				}
			}
		}
	})
	if n < 10 {
		t.Fatalf("walked %d structs of the config; want the whole config", n)
	}
}
