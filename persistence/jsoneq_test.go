package persistence

import "testing"

func TestJSONEqual(t *testing.T) {
	cases := []struct {
		a, b string
		want bool
	}{
		{`{"a":1,"b":2}`, `{"b":2,"a":1}`, true},
		{`{"a":1,"b":2}`, " {\n \"a\" : 1 ,\t\"b\":2 } ", true},
		{`{"a":1}`, `{"a":1.0}`, true},
		{`{"a":100}`, `{"a":1e2}`, true},
		{`{"a":0.5}`, `{"a":5E-1}`, true},
		{`{"a":0}`, `{"a":-0.0}`, true},
		{`{"a":12345678901234567890123}`, `{"a":12345678901234567890124}`, false},
		{`{"a":1e999999999}`, `{"a":1e999999998}`, false},
		{`{"a":"\u00e9"}`, `{"a":"é"}`, true},
		{`{"a":1,"a":2}`, `{"a":2}`, true},
		{`{"a":[1,2]}`, `{"a":[2,1]}`, false},
		{`{"a":null}`, `{}`, false},
		{`{"a":null}`, `{"a":false}`, false},
		{`{"a":"1"}`, `{"a":1}`, false},
		{`{"a":{"b":[true,{"c":null}]}}`, `{"a":{"b":[true,{"c":null}]}}`, true},
		{`{"a":{"b":1}}`, `{"a":{"b":1,"c":1}}`, false},
	}
	for _, c := range cases {
		got, err := JSONEqual([]byte(c.a), []byte(c.b))
		if err != nil {
			t.Fatalf("JSONEqual(%s, %s): %v", c.a, c.b, err)
		}
		if got != c.want {
			t.Errorf("JSONEqual(%s, %s) = %v, want %v", c.a, c.b, got, c.want)
		}
	}
	for _, bad := range []string{`{"a":`, `{} {}`, ``, `{"a":1}x`} {
		if _, err := JSONEqual([]byte(bad), []byte(`{}`)); err == nil {
			t.Errorf("JSONEqual(%q, {}): no error", bad)
		}
	}
}
