package config

import (
	"reflect"
	"testing"
)

// Issue 10 item 6: batch_bytes and dead_letter_max_bytes, their defaults,
// and the combinations no store can commit, each an error naming its
// field (drover check exits 2 with it).
func TestBatchLimits(t *testing.T) {
	const pg = "store: {url: 'postgres://u@h:5432/db'}\n"
	const lite = "store: {url: 'sqlite:./x.db'}\n"
	tests := []struct {
		name string
		yaml string
		want []string // every error, exactly; nil: valid
	}{
		{"defaults", src, nil},
		{"set", src + "    batch_bytes: 1048576\n    max_message_bytes: 1048576\n    dead_letter_max_bytes: 1024\n", nil},
		{"batch bytes small", src + "    batch_bytes: 512\n", []string{"sources[0].batch_bytes: must be between 1024 and 1073741824, not 512"}},
		{"batch bytes type", src + "    batch_bytes: lots\n", []string{`sources[0].batch_bytes: must be an integer, not "lots"`}},
		{"dead letter bytes zero", src + "    dead_letter_max_bytes: 0\n", []string{"sources[0].dead_letter_max_bytes: must be between 1 and 1073741824, not 0"}},
		{"message over batch", src + "    batch_bytes: 1048576\n    max_message_bytes: 2097152\n", []string{
			"sources[0].max_message_bytes: must not exceed batch_bytes (1048576), not 2097152: a message that size could never fit a batch"}},
		{"default message over batch", src + "    batch_bytes: 65536\n    dead_letter_max_bytes: 1024\n", []string{
			"sources[0].max_message_bytes: must not exceed batch_bytes (65536), not 1048576: a message that size could never fit a batch"}},
		{"dead letter over batch", src + "    batch_bytes: 1048576\n    max_message_bytes: 1024\n    dead_letter_max_bytes: 2097152\n", []string{
			"sources[0].dead_letter_max_bytes: must not exceed batch_bytes (1048576), not 2097152: a dead letter that size could never fit a batch"}},
		{"postgres takes 512 MiB", pg + src + "    batch_bytes: 536870912\n", nil},
		{"postgres refuses more", pg + src + "    batch_bytes: 536870913\n", []string{
			"sources[0].batch_bytes: must be at most 536870912 with a PostgreSQL store, not 536870913: a batch travels in one statement, and the server refuses one over 1 GB"}},
		{"sqlite takes a big batch", lite + src + "    batch_bytes: 1073741824\n", nil},
		{"sqlite refuses a dead letter over its value limit", lite + src + "    batch_bytes: 1073741824\n    dead_letter_max_bytes: 1073741824\n", []string{
			"sources[0].dead_letter_max_bytes: must be at most 1000000000 with a SQLite store, not 1073741824: SQLite refuses a longer value"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, errs := parse(t, tt.yaml)
			var got []string
			for _, e := range errs {
				got = append(got, e.Error())
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("errors:\n got %q\nwant %q", got, tt.want)
			}
			if tt.name == "defaults" {
				s := c.Sources[0]
				if s.BatchBytes != 16<<20 || s.DeadLetterMaxBytes != 256<<10 || s.Decode().MaxDeadLetterBytes != 256<<10 {
					t.Errorf("defaults: batch_bytes %d, dead_letter_max_bytes %d, decode %+v", s.BatchBytes, s.DeadLetterMaxBytes, s.Decode())
				}
			}
			if tt.name == "set" {
				if s := c.Sources[0]; s.BatchBytes != 1<<20 || s.DeadLetterMaxBytes != 1024 {
					t.Errorf("set: batch_bytes %d, dead_letter_max_bytes %d", s.BatchBytes, s.DeadLetterMaxBytes)
				}
			}
		})
	}
}
