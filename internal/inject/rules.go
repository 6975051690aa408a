package inject

// Any is the operation name that matches every operation (the OpAny of
// brokers/memory and persistence/memory).
const Any = "any"

// rule is one Add call not yet used up.
type rule struct {
	op  string
	n   int
	err error
}

// Rules is the list of injected failures still to be used up. The zero
// value has none.
type Rules struct {
	rules []rule // in Add order
}

// Add makes the next n calls of op fail with err; n <= 0 adds nothing. The
// owner checks op and chooses what a nil err stands for.
func (r *Rules) Add(op string, n int, err error) {
	if n <= 0 {
		return
	}
	r.rules = append(r.rules, rule{op: op, n: n, err: err})
}

// Take uses up one failure for op, if any: the first rule, in Add order,
// that names op or Any. It reports whether a rule matched and returns that
// rule's error (nil when the rule was added with none).
func (r *Rules) Take(op string) (matched bool, err error) {
	for i := range r.rules {
		ru := &r.rules[i]
		if ru.op != op && ru.op != Any {
			continue
		}
		ru.n--
		err := ru.err
		if ru.n == 0 {
			r.rules = append(r.rules[:i], r.rules[i+1:]...)
		}
		return true, err
	}
	return false, nil
}

// Clear removes every rule.
func (r *Rules) Clear() { r.rules = nil }
