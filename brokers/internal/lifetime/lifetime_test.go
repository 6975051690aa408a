package lifetime

import (
	"errors"
	"fmt"
	"testing"

	"github.com/drover-dev/drover/brokers"
)

func TestTranslatePassesNilAndDroversOwnErrors(t *testing.T) {
	calls := 0
	f := func(op string, err error) error {
		calls++
		return &brokers.Error{Op: op, Retryable: true, Err: errors.New("client: " + err.Error())}
	}
	if err := Translate("fetch", nil, f); err != nil {
		t.Fatalf("nil became %v", err)
	}
	own := fmt.Errorf("wrapped: %w", &brokers.Error{Op: "open", Err: brokers.ErrClosed})
	if err := Translate("fetch", own, f); err != own {
		t.Fatalf("a *brokers.Error came back as %v, want it unchanged", err)
	}
	if calls != 0 {
		t.Fatalf("f called %d times for nil and a *brokers.Error", calls)
	}
	var be *brokers.Error
	if err := Translate("fetch", errors.New("boom"), f); !errors.As(err, &be) || be.Op != "fetch" || be.Err.Error() != "client: boom" {
		t.Fatalf("a client error became %v, want f's translation", err)
	}
}
