package node

import (
	"context"
	"fmt"

	"github.com/drover-dev/drover/cluster/debug"
)

// Not built yet (issue 13, items 1 and 5).

func (n *Node) controlPause(context.Context, debug.ControlRequest) (debug.ControlReply, error) {
	return debug.ControlReply{}, fmt.Errorf("%w: pause and resume are not built yet", debug.ErrControlConflict)
}
