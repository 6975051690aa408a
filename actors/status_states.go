package actors

// UnitStates calls f for every unit entry of the node's tree with its
// source's state: what Tree shows of the states, without copying or sorting
// the tree (the simulator looks at every node's states at every virtual
// instant). Sources come in the tree's order, the units of one source in no
// particular order. f runs under the tree's lock: it must not call the
// node.
func (n *Node) UnitStates(f func(source, sourceState, unit, unitState string)) {
	r := n.node.reg
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, name := range r.order {
		s := r.sources[name]
		for id, u := range s.units {
			f(name, s.status.State, id, u.status.stateName())
		}
	}
}

// StatesVersion changes whenever what UnitStates shows may have changed
// (a source or unit entry added or removed, a state changed): a caller
// that saw the states at one version need not look again while it stays.
func (n *Node) StatesVersion() uint64 {
	r := n.node.reg
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.states
}
