package persistence

import "testing"

func TestReviewJSONEqualFastMatchesDecode(t *testing.T) {
	pairs := [][2]string{
		{"\"\xff\"", "\"\xfe\""},
		{`"\ud800"`, `"\udbff"`},
		{`"\ud800"`, `"\ufffd"`},
		{`"\ud800x"`, `"\ufffdx"`},
		{`{"\ud800":1}`, `{"\ufffd":1}`},
		{`"\u00e9"`, "\"\u00e9\""},
		{`1E400`, `10e399`},
		{`-0`, `0`},
		{`{"a":1,"a":2}`, `{"a":2}`},
	}
	for _, p := range pairs {
		fast, err1 := JSONEqual([]byte(p[0]), []byte(p[1]))
		slow, err2 := slowJSONEqual([]byte(p[0]), []byte(p[1]))
		t.Logf("%q %q fast=%v,%v slow=%v,%v", p[0], p[1], fast, err1, slow, err2)
		if fast != slow || (err1 == nil) != (err2 == nil) {
			t.Errorf("%q vs %q: JSONEqual %v (%v), the decode %v (%v)", p[0], p[1], fast, err1, slow, err2)
		}
	}
}
