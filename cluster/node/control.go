package node

import (
	"context"
	"fmt"

	"github.com/drover-dev/drover/cluster/debug"
)

// Control carries out an operator's control (debug.Controller): POST
// /debug/control/{action} and the drover pause|resume|seek|drain|undrain|
// reload commands.
func (n *Node) Control(ctx context.Context, req debug.ControlRequest) (debug.ControlReply, error) {
	switch req.Action {
	case debug.ActionPause, debug.ActionResume:
		return n.controlPause(ctx, req)
	case debug.ActionSeek:
		return n.controlSeek(ctx, req)
	case debug.ActionDrain, debug.ActionUndrain, debug.ActionExit:
		return n.controlDrain(ctx, req)
	case debug.ActionReload:
		return n.controlReload(ctx, req)
	}
	return debug.ControlReply{}, fmt.Errorf("%w: unknown action %q (pause, resume, seek, drain, undrain, exit, reload)", debug.ErrBadControl, req.Action)
}
