package node

import (
	"context"
	"fmt"

	"github.com/drover-dev/drover/cluster/debug"
)

// Not built yet (issue 13, items 3 and 4).

func (n *Node) controlDrain(context.Context, debug.ControlRequest) (debug.ControlReply, error) {
	return debug.ControlReply{}, fmt.Errorf("%w: drain, undrain and exit are not built yet", debug.ErrControlConflict)
}

func (n *Node) controlReload(context.Context, debug.ControlRequest) (debug.ControlReply, error) {
	return debug.ControlReply{}, fmt.Errorf("%w: reload is not built yet", debug.ErrControlConflict)
}
