package bench

import (
	"strings"
	"testing"
)

// A store URL the driver refuses is named without its password.
func TestOpenDBErrorHidesThePassword(t *testing.T) {
	_, err := openDB(t.Context(), "postgres://u:pw-Zq7-secret@127.0.0.1:notaport/db", 1)
	if err == nil {
		t.Fatal("openDB accepted a URL with a bad port")
	}
	if strings.Contains(err.Error(), "pw-Zq7-secret") {
		t.Fatalf("the password shows: %v", err)
	}
}
