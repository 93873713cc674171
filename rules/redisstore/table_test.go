package redisstore

import (
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/edge-gateway/edge/rules"
	"github.com/edge-gateway/edge/rules/counter"
)

// luaLocals returns the names and values of take.lua's line
// "local A, B, … = 0, 1, …" whose first name is first.
func luaLocals(t *testing.T, first string) (names []string, ids []int) {
	t.Helper()
	re := regexp.MustCompile(`(?m)^local (` + first + `(?:, [A-Z_]+)*) = (\d+(?:, \d+)*)$`)
	m := re.FindStringSubmatch(takeScript)
	if m == nil {
		t.Fatalf("take.lua has no line local %s, … = …", first)
	}
	names = strings.Split(m[1], ", ")
	for _, v := range strings.Split(m[2], ", ") {
		id, _ := strconv.Atoi(v)
		ids = append(ids, id)
	}
	if len(names) != len(ids) {
		t.Fatalf("take.lua's local %s, …: %d names, %d values", first, len(names), len(ids))
	}
	return names, ids
}

// luaNames returns the Lua names of the table's algorithms whose Spec has
// flag.
func luaNames(flag func(counter.Spec) bool) []string {
	var out []string
	for _, a := range counter.Algorithms() {
		if s := a.Spec(); flag(s) {
			out = append(out, s.Lua)
		}
	}
	return out
}

// TestTakeLuaMatchesTable holds take.lua to counter's table, which the Go
// side of the wire reads: its port table gives every algorithm its id
// (opCode sends 8×id) under the entry's Lua name, its op kinds are
// counter's, the algorithms it keeps a sorted set for (hasSet) and reads a
// Member for (sendsMember) are the table's, and its fast path dispatches
// exactly the algorithms of Spec.FastPath (needsPort sends the others to
// the port, which dispatches every one).
func TestTakeLuaMatchesTable(t *testing.T) {
	t.Parallel()
	all := luaNames(func(counter.Spec) bool { return true })
	names, ids := luaLocals(t, all[0])
	if !slices.Equal(names, all) {
		t.Errorf("take.lua's port table names %q, the table %q", names, all)
	}
	for i, id := range ids {
		if id != i {
			t.Errorf("take.lua gives %s the id %d, the table %d", names[i], id, i)
		}
	}

	kinds, kindIDs := luaLocals(t, "TAKE")
	want := map[string]rules.OpKind{"TAKE": rules.OpTake, "PEEK": rules.OpPeek, "ADD": rules.OpAdd, "REFUND": rules.OpRefund, "RESET": rules.OpReset}
	if len(kinds) != len(want) {
		t.Errorf("take.lua names the op kinds %q, want %d", kinds, len(want))
	}
	for i, k := range kinds {
		if w, ok := want[k]; !ok || int(w) != kindIDs[i] {
			t.Errorf("take.lua's %s = %d, counter's is %d", k, kindIDs[i], w)
		}
	}

	// Every test of a sorted set's algorithms ("a == LOG or a == DISTINCT")
	// names the table's Set ones.
	set := luaNames(func(s counter.Spec) bool { return s.Set })
	isSet := regexp.MustCompile(`\b(a|alg) == [A-Z]+(?: or (?:a|alg) == [A-Z]+)+`)
	name := regexp.MustCompile(`== ([A-Z]+)`)
	found := 0
	for _, expr := range isSet.FindAllString(takeScript, -1) {
		var got []string
		for _, m := range name.FindAllStringSubmatch(expr, -1) {
			got = append(got, m[1])
		}
		if !slices.ContainsFunc(got, func(n string) bool { return slices.Contains(all, n) }) {
			continue // an op kind's test
		}
		found++
		if !slices.Equal(got, set) {
			t.Errorf("take.lua tests %q for a sorted set, the table's Set algorithms are %q", expr, set)
		}
	}
	if found < 3 { // the seed pass, the port's header and use(i)
		t.Errorf("take.lua tests an op for a sorted set %d times, want 3", found)
	}

	// use(i) reads a Member for the table's Members algorithms.
	member := regexp.MustCompile(`(?m)^\tif (.*) and mode == 0 then\n\t\tmember = ARGV`)
	if m := member.FindStringSubmatch(takeScript); m == nil {
		t.Error("take.lua's use(i) reads no member")
	} else {
		var got []string
		for _, n := range name.FindAllStringSubmatch(m[1], -1) {
			got = append(got, n[1])
		}
		if want := luaNames(func(s counter.Spec) bool { return s.Members }); !slices.Equal(got, want) {
			t.Errorf("take.lua reads a member for %q, the table's Members algorithms are %q", got, want)
		}
	}

	// The fast path (the chunk between its header and the port's)
	// dispatches the FastPath algorithms and no other; the port every one.
	fastAt := strings.Index(takeScript, "-- The fast path ---")
	portAt := strings.Index(takeScript, "-- The port ---")
	if fastAt < 0 || portAt < fastAt {
		t.Fatal("take.lua's fast path and port headers not found")
	}
	fast, port := takeScript[fastAt:portAt], takeScript[portAt:]
	for _, a := range counter.Algorithms() {
		s := a.Spec()
		test := regexp.MustCompile(`(==|>=) ` + s.Lua + `\b`)
		if inFast := test.MatchString(fast); inFast != s.FastPath {
			t.Errorf("%s (%s): in take.lua's fast path %v, Spec.FastPath %v", s.Name, s.Lua, inFast, s.FastPath)
		}
		if !regexp.MustCompile(`alg == ` + s.Lua + `\b`).MatchString(port) {
			t.Errorf("%s (%s): take.lua's port never dispatches it", s.Name, s.Lua)
		}
	}
}
