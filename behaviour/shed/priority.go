package shed

// Priority is a rule's priority for load shedding (priority): when the
// origin is saturated the edge sheds the lowest first. A request's
// priority is the highest of its matching rules' priorities,
// PriorityNormal when none sets one.
type Priority uint8

const (
	// PriorityUnset: the rule sets no priority.
	PriorityUnset Priority = iota
	// PriorityLow is shed first (API reads, exports).
	PriorityLow
	// PriorityNormal is the default.
	PriorityNormal
	// PriorityHigh (logins, signups).
	PriorityHigh
	// PriorityCritical is shed last (OTP verifies): only at the ceiling
	// itself.
	PriorityCritical
	// NumPriorities bounds per-priority tables.
	NumPriorities = int(PriorityCritical) + 1
)

var priorityNames = [NumPriorities]string{"", "low", "normal", "high", "critical"}

// String returns the priority's policy name, such as "high" ("" when unset).
func (p Priority) String() string {
	if int(p) < NumPriorities {
		return priorityNames[p]
	}
	return "unknown"
}

// ParsePriority parses a priority's policy name.
func ParsePriority(s string) (Priority, bool) {
	for i := PriorityLow; int(i) < NumPriorities; i++ {
		if priorityNames[i] == s {
			return i, true
		}
	}
	return PriorityUnset, false
}
