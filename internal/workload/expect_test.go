package workload_test

import (
	"strings"
	"testing"

	"github.com/drover-dev/drover/actors/decode"
	"github.com/drover-dev/drover/brokers"
	"github.com/drover-dev/drover/internal/workload"
)

func m(key, body string) brokers.Message {
	return brokers.Message{Key: []byte(key), Value: []byte(body)}
}

func TestExpectFoldsPerKeyAndCollectsDeadLetters(t *testing.T) {
	dc := decode.Config{KeyField: "id"}
	e, err := workload.Expect(dc, []workload.Sent{
		{Partition: "0", Msg: m("1", `{"id":1,"v":"a"}`)},
		{Partition: "0", Msg: m("1", `{"id":1,"v":"b"}`)},
		{Partition: "1", Msg: m("2", `{"id":2}`)},
		{Partition: "1", Msg: m("2", `{"id":2,"_deleted":true}`)},
		{Partition: "1", Msg: m("x", `not json`)},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(e.Docs) != 1 || e.Docs["1"] != `{"id":1,"v":"b"}` {
		t.Errorf("docs %v", e.Docs)
	}
	if len(e.Dead) != 1 || !strings.HasPrefix(e.Dead[4], "invalid JSON") {
		t.Errorf("dead %v", e.Dead)
	}
	_, err = workload.Expect(dc, []workload.Sent{
		{Partition: "0", Msg: m("1", `{"id":1}`)},
		{Partition: "1", Msg: m("1", `{"id":1,"v":2}`)},
	})
	if err == nil || !strings.Contains(err.Error(), `key "1" is written in partitions 0 and 1`) {
		t.Errorf("a key in two partitions: %v", err)
	}
}
