package redact

import (
	"errors"
	"net/url"
	"strings"
	"testing"
)

// Every URL and DSN form the stores and brokers accept, each with the
// secret it holds ("S3cr3t" somewhere in it) and its masked form.
var forms = []struct {
	in, want string
	secret   string // "" when the form holds none
}{
	{"sqlite:./drover.db", "sqlite:./drover.db", ""},
	{"sqlite:///var/lib/drover/a@b.db", "sqlite:///var/lib/drover/a@b.db", ""},
	{"memory:", "memory:", ""},
	{"postgres://drover@db:5432/d", "postgres://drover@db:5432/d", ""},
	{"postgres://drover:S3cr3t@db:5432/d?sslmode=disable", "postgres://drover:xxxxx@db:5432/d?sslmode=disable", "S3cr3t"},
	{"postgresql://drover:S3%2Fcr3t@db/d", "postgresql://drover:xxxxx@db/d", "S3/cr3t"},
	{"postgres://drover:S3/cr?3t@db/d", "postgres://drover:xxxxx@db/d", "S3/cr?3t"},
	{"postgres://drover@db/d?sslmode=require&password=S3cr3t&sslpassword=S3cr3t", "postgres://drover@db/d?sslmode=require&password=xxxxx&sslpassword=xxxxx", "S3cr3t"},
	{"postgres://db/d?pass%77ord=S3cr3t", "postgres://db/d?pass%77ord=xxxxx", "S3cr3t"},
	{"postgres://u:S3cr3t@h1:5432,h2:5433/d", "postgres://u:xxxxx@h1:5432,h2:5433/d", "S3cr3t"},
	{"postgres://u:S3cr3t@h:bad port/db", "postgres://u:xxxxx@h:bad port/db", "S3cr3t"},
	{"//u:S3cr3t@h/db", "//u:xxxxx@h/db", "S3cr3t"},
	{"postgres:u:S3cr3t@h", "postgres:u:xxxxx@h", "S3cr3t"},
	{"S3cr3t@h:4222", "xxxxx@h:4222", "S3cr3t"},
	{"u:S3cr3t@h:4222", "u:xxxxx@h:4222", "S3cr3t"},
	{"host=db user=drover password=S3cr3t dbname=d", "host=db user=drover password=xxxxx dbname=d", "S3cr3t"},
	{"host=db password = 'S3 cr\\'3t' dbname=d", "host=db password = 'xxxxx' dbname=d", "S3 cr\\'3t"},
	{"host=db password=S3\\ cr3t", "host=db password=xxxxx", "S3\\ cr3t"},
	{"host=db password='S3cr3t", "host=db password='xxxxx", "S3cr3t"},
	{"host=db junk password=S3cr3t", "host=db xxxxx", "S3cr3t"},
	{"nats://h:4222", "nats://h:4222", ""},
	{"nats://u:S3cr3t@h:4222", "nats://u:xxxxx@h:4222", "S3cr3t"},
	{"nats://S3cr3t@h:4222", "nats://xxxxx@h:4222", "S3cr3t"},
	{"tls://S3cr3t@h:4222", "tls://xxxxx@h:4222", "S3cr3t"},
	{"nats://a:4222, nats://u:S3cr3t@b:4222,nats://S3cr3t@c:4222", "nats://a:4222, nats://u:xxxxx@b:4222,nats://xxxxx@c:4222", "S3cr3t"},
	{"https://AKIAEXAMPLE:S3cr3t@sqs.eu-west-1.amazonaws.com/1/q", "https://AKIAEXAMPLE:xxxxx@sqs.eu-west-1.amazonaws.com/1/q", "S3cr3t"},
	{"https://q.example/1/q?X-Amz-Credential=AKIA%2F1&X-Amz-Security-Token=S3cr3t&X-Amz-Signature=S3cr3t&a=b#f",
		"https://q.example/1/q?X-Amz-Credential=xxxxx&X-Amz-Security-Token=xxxxx&X-Amz-Signature=xxxxx&a=b#f", "S3cr3t"},
}

func TestURL(t *testing.T) {
	for _, f := range forms {
		got := URL(f.in)
		if got != f.want {
			t.Errorf("URL(%q) = %q, want %q", f.in, got, f.want)
		}
		if f.secret != "" && strings.Contains(got, f.secret) {
			t.Errorf("URL(%q) = %q shows the secret", f.in, got)
		}
		if URL(got) != got {
			t.Errorf("URL(%q) is not stable: %q", got, URL(got))
		}
	}
}

func TestSecrets(t *testing.T) {
	for _, f := range forms {
		ss := Secrets(f.in)
		if f.secret == "" {
			if len(ss) != 0 {
				t.Errorf("Secrets(%q) = %q, want none", f.in, ss)
			}
			continue
		}
		found := false
		for _, s := range ss {
			found = found || strings.Contains(s, f.secret)
		}
		if !found {
			t.Errorf("Secrets(%q) = %q, lacks %q", f.in, ss, f.secret)
		}
		// an error that quotes the URL, whole or decoded, scrubs clean
		dec, _ := url.PathUnescape(f.in)
		msg := Scrub(errors.New("parse "+f.in+": bad ("+dec+")").Error(), ss...)
		if strings.Contains(msg, f.secret) {
			t.Errorf("Scrub left %q in %q", f.secret, msg)
		}
	}
}

func TestScrubLongestFirst(t *testing.T) {
	if got := Scrub("a abc ab", "ab", "abc"); got != "a xxxxx xxxxx" {
		t.Errorf("Scrub = %q", got)
	}
	if got := Scrub("abc", ""); got != "abc" {
		t.Errorf("Scrub with an empty secret = %q", got)
	}
}

// A password holding an unescaped '@': pgx ends the user info at the
// first '@' and quotes the rest of the password as the host
// ("lookup ss-secret@127.0.0.1: no such host"), URL and Secrets at the
// last. Scrub masks every '@'-piece, as written, decoded and encoded.
func TestScrubPasswordWithAt(t *testing.T) {
	for _, c := range []struct {
		url, msg string
		leak     []string // none may survive
	}{
		{"postgres://drover:p@ss-secret@127.0.0.1:1/db",
			"failed to connect to `user=drover database=db`: hostname resolving error: lookup ss-secret@127.0.0.1: no such host",
			[]string{"ss-secret"}},
		{"postgres://drover:top@ss-secret@127.0.0.1:1/db",
			"failed to connect to `user=drover database=db`: lookup ss-secret@127.0.0.1; password top rejected; as sent: top%40ss-secret",
			[]string{"ss-secret", "top"}},
		{"postgres://drover:p%40ss-secret@127.0.0.1:1/db",
			"lookup ss-secret@127.0.0.1; sent p@ss-secret; as written p%40ss-secret",
			[]string{"ss-secret", "p@ss", "p%40ss"}},
		{"nats://u:a b@c d@h:4222", "auth a+b failed; c%20d; c d", []string{"a+b", "a b", "c%20d", "c d"}},
	} {
		got := Scrub(c.msg, Secrets(c.url)...)
		for _, l := range c.leak {
			if strings.Contains(got, l) {
				t.Errorf("Scrub(%q) for %s = %q: shows %q", c.msg, URL(c.url), got, l)
			}
		}
	}
}

// The mask itself is never masked again (one pass), whatever the secret.
func TestScrubOnePass(t *testing.T) {
	if got := Scrub("x and xx", "x", "xx"); got != Mask+" and "+Mask {
		t.Errorf("Scrub = %q", got)
	}
}

// CheckAt refuses a URL whose user info readers would split differently,
// and quotes nothing of it.
func TestCheckAt(t *testing.T) {
	for _, c := range []struct {
		in      string
		refused bool
	}{
		{"postgres://drover:p@ss-secret@127.0.0.1:1/db", true},
		{"POSTGRESQL://u:a@b@h/db", true},
		{"postgres://u:p@h/db?application_name=a@b", true},
		{"//u:p@ss-secret@h/db", true},
		{"postgres:u:p@ss-secret@h", true},
		{"nats://u:p@ss-secret@h:4222", true},
		{"nats://h:1, nats://t@ss-secret@h:2", true},
		{"u:p@ss-secret@h:4222", true},
		{"postgres://drover:p%40ss-secret@127.0.0.1:1/db", false},
		{"postgres://u:p@h1,h2/db?application_name=a%40b", false},
		{"postgres://h/db", false},
		{"nats://h:1,nats://u:p@h:2,nats://t@h:3", false},
		{"sqlite:///var/lib/a@b@c.db", false},
		{"sqlite:a@b@c.db", false},
		{"host=h password='a@b@c' dbname=d", false},
		{"memory:", false},
		{"", false},
	} {
		err := CheckAt(c.in)
		if (err != nil) != c.refused {
			t.Errorf("CheckAt(%q) = %v, want refused %v", c.in, err, c.refused)
		}
		if err != nil && (!errors.Is(err, ErrUnescapedAt) || !strings.Contains(err.Error(), "%40") || strings.Contains(err.Error(), "ss-secret")) {
			t.Errorf("CheckAt(%q) = %v: want ErrUnescapedAt, advice and no secret", c.in, err)
		}
	}
}

// FuzzURL: the pieces walk cuts a string into are the string, whatever it
// is, and URL masks exactly the secret ones.
func FuzzURL(f *testing.F) {
	for _, fm := range forms {
		f.Add(fm.in)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var all, masked strings.Builder
		walk(s, func(text string, secret bool) {
			all.WriteString(text)
			if secret {
				masked.WriteString(Mask)
			} else {
				masked.WriteString(text)
			}
		})
		if all.String() != s {
			t.Fatalf("walk(%q) pieces make %q", s, all.String())
		}
		if got := URL(s); got != masked.String() {
			t.Fatalf("URL(%q) = %q, want %q", s, got, masked.String())
		}
	})
}

// A piece of one or two characters is not masked on its own: the message
// stays readable, and the rest of the secret is masked.
func TestScrubShortPieceKeepsMessage(t *testing.T) {
	msg := "open postgres store: lookup ss-secret@127.0.0.1: no such host"
	got := Scrub(msg, Secrets("postgres://drover:p@ss-secret@127.0.0.1:1/db")...)
	if want := "open postgres store: lookup " + Mask + "@127.0.0.1: no such host"; got != want {
		t.Errorf("Scrub = %q, want %q", got, want)
	}
}

// Secrets whose occurrences overlap are masked as the union of what they
// cover: no tail of the longer one shows.
func TestScrubOverlappingSecrets(t *testing.T) {
	for _, c := range []struct{ text, want string }{
		{"auth xyzabcdefgh failed", "auth " + Mask + " failed"},
		{"abcdefgh and xyzabc", Mask + " and " + Mask},
		{"nothing here", "nothing here"},
	} {
		if got := Scrub(c.text, "abcdefgh", "xyzabc"); got != c.want {
			t.Errorf("Scrub(%q) = %q, want %q", c.text, got, c.want)
		}
	}
}
