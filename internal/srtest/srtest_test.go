package srtest

import (
	"encoding/json"
	"net/http"
	"testing"
)

// Start serves without a test (the demo's registry) and Close stops it:
// a request after Close finds no server.
func TestStartServesUntilClose(t *testing.T) {
	r, err := Start("127.0.0.1:0", "", "")
	if err != nil {
		t.Fatal(err)
	}
	id := r.Add("orders-value", Schema{Schema: `"string"`})
	resp, err := http.Get(r.URL() + "/subjects/orders-value/versions/1")
	if err != nil {
		t.Fatal(err)
	}
	var got Schema
	err = json.NewDecoder(resp.Body).Decode(&got)
	resp.Body.Close()
	if err != nil || got.ID != id || got.Schema != `"string"` || got.Version != 1 {
		t.Fatalf("got %+v, %v; want id %d version 1", got, err, id)
	}
	r.Close()
	if resp, err := http.Get(r.URL() + "/schemas/ids/1"); err == nil {
		resp.Body.Close()
		t.Fatal("the registry still answers after Close")
	}
}
