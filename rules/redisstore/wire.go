package redisstore

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"strconv"

	"github.com/redis/go-redis/v9"

	"github.com/edge-gateway/edge/rules"
	"github.com/edge-gateway/edge/rules/counter"
)

// Script modes and the sizes of the script's replies (take.lua's header).
const (
	modeTake = 0
	modeUndo = 1

	resultFields = 4 // allowed, remaining, reset_after_us, retry_after_us
	undoFields   = 2 // remaining, reset_after_us

	hexKeyLen = 2 * len(rules.Key{})
	logSuffix = ":log"

	// format2Mark is the version marker of a format 2 key's name
	// (rules.KeyFormat2), between the prefix and the hash tag: "edge:v2{…}"
	// beside format 1's "edge:{…}", so the two formats never share a name
	// and the hash slot is the Key's either way.
	format2Mark = "v2"

	// maxReplyValue bounds every number a reply may carry: the script's
	// values are exact integers under 2^53 (counter.MaxExact).
	maxReplyValue = counter.MaxExact

	// cmdHead is the number of a script call's arguments before its keys:
	// EVALSHA, the SHA and the number of keys.
	cmdHead = 3
)

// shaArg is takeSHA boxed once: boxing a string allocates.
var shaArg any = takeSHA

// call is one script call: the ops of one hash slot (on a single Redis,
// all of a Take's ops), as the command go-redis writes, and its reply.
//
// Its buffers are reused from call to call (Take pools them), so that
// preparing a call allocates nothing once they have grown: each key is a
// byte buffer of fixed length boxed in an interface once, whose hex digits
// are rewritten in place; each number is a pointer into nums, which boxes
// without allocating; and the *redis.Cmd is kept per argument count (it
// holds args, whose elements are replaced in place).
type call struct {
	idx  []int // the call's op indexes, in order; nil: all of them
	undo bool  // a take returning undo payloads (a cross-slot call)
	// seed: a take whose twins take.lua carries over (prepare).
	seed bool
	// shareable: a take of take.lua's fast path (no sliding_log, no undo
	// payloads), which may share a script call with others (coalescing).
	shareable bool

	args  []any        // evalsha, the SHA, #keys, keys…, ARGV…
	keys  []*keyBuf    // the key buffers, one per key slot (format 1's names)
	keys2 []*keyBuf    // the same for format 2's names (format2Mark)
	mems  []*memberBuf // the Member buffers, one per distinct op
	nkeys int          // keys in use
	nums  []int64      // ARGV's numbers, which args point into
	cmds  []*redis.Cmd // by len(args): commands over args
	cmd   *redis.Cmd   // the command of the call being prepared or run

	node  scripter
	reply any
	err   error

	now int64   // µs, the time the script decided at
	pay [][]any // per op of the call: its undo payload, nil when none
}

// keyBuf is one key slot's buffer: the Store's prefix, "{", the Key in
// hex, "}" and logSuffix; a string key is all of it but the suffix.
type keyBuf struct {
	b   []byte
	key any // b[:len(b)-len(logSuffix)], boxed once
	log any // b, boxed once
}

// memberBuf is a distinct op's Member as take.lua reads it: 16 lowercase
// hex digits, big-endian, so that the sorted set orders members of one
// score as rules orders them (by value); the bytes are rewritten in place
// and boxed once.
type memberBuf struct {
	b   []byte
	arg any
}

// memberArg returns the i-th member buffer holding m, boxed.
func (c *call) memberArg(i int, m uint64) any {
	for len(c.mems) <= i {
		b := make([]byte, 16)
		c.mems = append(c.mems, &memberBuf{b: b, arg: b})
	}
	mb := c.mems[i]
	var be [8]byte
	binary.BigEndian.PutUint64(be[:], m)
	hex.Encode(mb.b, be[:])
	return mb.arg
}

// len and op map the call's j-th op to the Take's.
func (c *call) len(ops []rules.Op) int {
	if c.idx == nil {
		return len(ops)
	}
	return len(c.idx)
}

func (c *call) op(j int) int {
	if c.idx == nil {
		return j
	}
	return c.idx[j]
}

// appendKey appends k's Redis key in format f: the prefix, format2Mark in
// format 2, and the Key in hex inside a hash tag, so that a sliding_log's
// sorted set (the same name plus logSuffix) lives in the same hash slot.
// Format 1's name (and that of format 0, an op no engine hashed) is
// exactly the name of the nodes before key formats. The Key is already a
// keyed hash of its values (rules.Key), so no request input reaches Redis
// raw.
func (s *Store) appendKey(dst []byte, k *rules.Key, f rules.KeyFormat) []byte {
	dst = append(dst, s.prefix...)
	if f == rules.KeyFormat2 {
		dst = append(dst, format2Mark...)
	}
	dst = append(dst, '{')
	dst = hex.AppendEncode(dst, k[:])
	return append(dst, '}')
}

// keyName returns k's Redis key in format 1.
func (s *Store) keyName(k *rules.Key) string { return s.keyNameOf(k, rules.KeyFormat1) }

// keyNameOf returns k's Redis key in format f.
func (s *Store) keyNameOf(k *rules.Key, f rules.KeyFormat) string {
	return string(s.appendKey(make([]byte, 0, len(s.prefix)+len(format2Mark)+hexKeyLen+2), k, f))
}

// keyArg returns key slot i holding op's key (its sorted set's with log),
// named in op's format, boxed.
func (s *Store) keyArg(c *call, i int, op *rules.Op, log bool) any {
	k := &op.Key
	keys, mark := &c.keys, ""
	if op.KeyFormat == rules.KeyFormat2 {
		keys, mark = &c.keys2, format2Mark
	}
	n := len(s.prefix) + len(mark) + 1 + hexKeyLen + 1 + len(logSuffix)
	for len(*keys) <= i {
		*keys = append(*keys, nil)
	}
	kb := (*keys)[i]
	if kb == nil || len(kb.b) != n {
		b := make([]byte, 0, n)
		b = append(b, s.prefix...)
		b = append(b, mark...)
		b = append(b, '{')
		b = append(b, make([]byte, hexKeyLen)...)
		b = append(b, '}')
		b = append(b, logSuffix...)
		kb = &keyBuf{b: b, key: b[:n-len(logSuffix)], log: b}
		(*keys)[i] = kb
	}
	hex.Encode(kb.b[len(s.prefix)+len(mark)+1:], k[:])
	if log {
		return kb.log
	}
	return kb.key
}

// keyString returns the call's i-th key (for routing and tests).
func (c *call) keyString(i int) string {
	switch k := c.args[cmdHead+i].(type) {
	case []byte:
		return string(k)
	case string:
		return k
	}
	return ""
}

// reserve makes room for a call of nk keys and nn numbers (and extra more
// arguments), so that appending them moves nothing: args' backing array,
// which cached commands hold, only changes here, dropping them.
func (c *call) reserve(nk, nn, extra int) {
	na := cmdHead + nk + nn + extra
	if cap(c.args) < na {
		c.args = make([]any, 0, max(na, 2*cap(c.args), 16))
		c.cmds = nil
	}
	if cap(c.nums) < nn {
		c.nums = make([]int64, 0, max(nn, 2*cap(c.nums), 16))
	}
	c.args, c.nums = c.args[:0], c.nums[:0]
}

// num appends v to ARGV.
func (c *call) num(v int64) {
	c.nums = append(c.nums, v)
	c.args = append(c.args, &c.nums[len(c.nums)-1])
}

// command returns the call's EVALSHA, ready to run: a cached one when the
// call had this many arguments before.
func (c *call) command() *redis.Cmd {
	n := len(c.args)
	if n < len(c.cmds) && c.cmds[n] != nil {
		cmd := c.cmds[n]
		cmd.SetErr(nil)
		cmd.SetVal(nil)
		c.cmd = cmd
		return cmd
	}
	cmd := redis.NewCmd(context.Background(), c.args...)
	for len(c.cmds) <= n {
		c.cmds = append(c.cmds, nil)
	}
	c.cmds[n] = cmd
	c.cmd = cmd
	return cmd
}

// evalCommand returns the call's EVAL (NOSCRIPT: the server lost the
// script), a command of its own.
func (c *call) evalCommand() *redis.Cmd { return evalOf(c.args) }

// evalOf returns the EVAL of a script call's EVALSHA arguments, a command
// of its own.
func evalOf(evalsha []any) *redis.Cmd {
	args := make([]any, len(evalsha))
	copy(args, evalsha)
	args[0], args[1] = "eval", takeScript
	return redis.NewCmd(context.Background(), args...)
}

// header is ARGV[1]: mode + 2×flag + 4×clock + 8×port + 16×seed +
// 32×ops. With clock, ARGV[2] and ARGV[3] are now and the slack; port says
// an op needs the script's port (a sliding_log), which the fast path does
// not run; seed says the call carries twins' state over (prepare).
func header(mode int64, flag, clock, port bool, ops int) int64 {
	h := mode + 32*int64(ops)
	if flag {
		h += 2
	}
	if clock {
		h += 4
	}
	if port {
		h += 8
	}
	return h
}

// needsPort reports whether op needs the script's port: the fast path runs
// the algorithms of counter.Spec.FastPath only (those without a sorted set,
// take.lua's header), and not a calendar window (Op.Calendar), a
// fixed_window whose start the caller gives.
func needsPort(op *rules.Op) bool { return !op.Algorithm.Spec().FastPath || op.Calendar }

// hasSet reports whether op keeps a sorted set beside its string key, in
// the key slot after it: its name plus logSuffix, in the same hash slot
// (counter.Spec.Set). A sliding_log's holds its timestamps, a distinct
// count's its members; the string's algorithm says whose a set is, so one
// of another algorithm reads as empty.
func hasSet(op *rules.Op) bool { return op.Algorithm.Spec().Set }

// sendsMember reports whether op's Member goes to the script, as a string
// after the ops' fields: an algorithm that counts members
// (counter.Spec.Members), in a take.
func sendsMember(op *rules.Op) bool { return op.Algorithm.Spec().Members }

// An op code holds the algorithm's id in 3 bits (opCode): 8 algorithms at
// most, and take.lua reads it so.
var _ [8 - counter.NumAlgorithms]struct{}

// opCode is an op's first field: kind + 8×algorithm (its id, the table's
// and take.lua's) + 64×enforce + 128×attempts + 256×calendar (one number:
// each costs the script a conversion).
func opCode(op *rules.Op) int64 {
	code := int64(op.Kind) + 8*int64(op.Algorithm)
	if op.Enforce {
		code += 64
	}
	if op.Attempts {
		code += 128
	}
	if op.Calendar {
		code += 256
	}
	return code
}

// prepare makes c the take call of ops[idx] (all ops when idx is nil) at
// nowUS (-1: the server's TIME); undo asks for undo payloads. The keys are
// one per op, two for a sliding_log or a distinct count (its sorted set
// beside it); ARGV is the header, now and the slack when the caller's
// clock decides, each op's code, limit, burst, period and cost, one number
// each, then each distinct op's Member in hex, in the ops' order (take.lua's
// header).
func (s *Store) prepare(c *call, ops []rules.Op, idx []int, nowUS int64, undo bool) {
	c.idx, c.undo = idx, undo
	n := c.len(ops)
	nk, nm, port := n, 0, false
	for j := range n {
		op := &ops[c.op(j)]
		if hasSet(op) {
			nk++
		}
		if sendsMember(op) {
			nm++
		}
		port = port || needsPort(op)
	}
	clock := nowUS >= 0 || s.slackMS != 0
	nn := 1 + 5*n
	if clock {
		nn += 2
	}
	c.reserve(nk, nn, nm)
	c.args = append(c.args, "evalsha", shaArg, nk) // a small int boxes without allocating
	ki := 0
	for j := range n {
		op := &ops[c.op(j)]
		c.args = append(c.args, s.keyArg(c, ki, op, false))
		ki++
		if hasSet(op) {
			c.args = append(c.args, s.keyArg(c, ki, op, true))
			ki++
		}
	}
	c.nkeys = nk
	// A key-secret rotation's twins (rules.Op.Twin) have their state
	// carried over to the op before them in the script when the two are
	// in one call, in order: not in a cluster's cross-slot batches (idx),
	// whose slots the script cannot reach from one another, nor undone.
	c.seed = false
	if idx == nil && !undo {
		for j := range n {
			c.seed = c.seed || ops[j].Twin
		}
	}
	c.shareable = !undo && !port && !c.seed
	h := header(modeTake, undo, clock, port, n)
	if c.seed {
		h += 16
	}
	c.num(h)
	if clock {
		c.num(nowUS)
		c.num(s.slackMS)
	}
	for j := range n {
		s.appendOp(c, &ops[c.op(j)])
	}
	mi := 0
	for j := range n {
		if op := &ops[c.op(j)]; sendsMember(op) {
			c.args = append(c.args, c.memberArg(mi, op.Member))
			mi++
		}
	}
}

// appendOp appends op's fields to ARGV: its code, limit, burst, period
// and cost. A calendar window (a fixed_window, which has no burst) sends
// its WindowStartUS in the burst's place, so the layout stays five
// numbers an op.
func (s *Store) appendOp(c *call, op *rules.Op) {
	code := opCode(op)
	if c.seed && op.Twin {
		code += 512 // take.lua's seed pass: the twin of the op before it
	}
	c.num(code)
	c.num(op.Limit)
	if op.Calendar {
		c.num(op.WindowStartUS)
	} else {
		c.num(op.Burst)
	}
	c.num(op.PeriodUS)
	c.num(op.Cost)
}

// run runs the call on n: one round trip, and one more by EVAL when the
// server answers NOSCRIPT (the script did not run).
func (c *call) run(ctx context.Context, s *Store, n scripter) {
	c.node = n
	cmd := c.command()
	c.reply, c.err = callResult(cmd, n.Process(ctx, cmd))
	if c.err != nil && redis.HasErrorPrefix(c.err, "NOSCRIPT") {
		s.sawNoScript(1)
		cmd = c.evalCommand()
		c.reply, c.err = callResult(cmd, n.Process(ctx, cmd))
	}
}

// decode checks a take's reply and fills res for the call's ops. Every
// element is type-checked and range-checked: a malformed reply is
// ErrMalformedReply, never a panic, and res is untouched then.
func (c *call) decode(ops []rules.Op, res []rules.Result, callerNowUS *int64) error {
	n := c.len(ops)
	want := 1 + resultFields*n
	if c.undo {
		want += n
	}
	arr, ok := c.reply.([]any)
	if !ok || len(arr) != want {
		return ErrMalformedReply
	}
	now, ok := arr[0].(int64)
	if !ok || now < 0 || now > maxClockUS || (callerNowUS != nil && now != *callerNowUS) {
		return ErrMalformedReply
	}
	for j := range n {
		f := arr[1+resultFields*j : 1+resultFields*(j+1)]
		allowed, ok1 := f[0].(int64)
		remaining, ok2 := f[1].(int64)
		reset, ok3 := f[2].(int64)
		retry, ok4 := f[3].(int64)
		if !ok1 || !ok2 || !ok3 || !ok4 ||
			allowed < 0 || allowed > 1 ||
			remaining < 0 || remaining > maxReplyValue ||
			reset < 0 || reset > maxReplyValue ||
			retry < -1 || retry > maxReplyValue ||
			(allowed == 1) != (retry == 0) ||
			(allowed == 0 && remaining != 0) {
			return ErrMalformedReply
		}
	}
	if c.undo {
		c.pay = make([][]any, n)
		for j := range n {
			switch p := arr[1+resultFields*n+j].(type) {
			case int64:
				if p != 0 {
					return ErrMalformedReply
				}
			case []any:
				if !validPayload(p) {
					return ErrMalformedReply
				}
				c.pay[j] = p
			default:
				return ErrMalformedReply
			}
		}
	}
	c.now = now
	for j := range n {
		f := arr[1+resultFields*j : 1+resultFields*(j+1)]
		retry := f[3].(int64)
		r := rules.Result{
			Allowed:    f[0].(int64) == 1,
			Remaining:  f[1].(int64),
			ResetAfter: rules.DurationUS(f[2].(int64)),
		}
		switch {
		case retry < 0:
			r.RetryAfter = rules.RetryNever
		default:
			r.RetryAfter = rules.DurationUS(retry)
		}
		res[c.op(j)] = r
	}
	return nil
}

// validPayload checks an undo payload's shape: restore, written, the number
// of members added, the members, then member/score pairs; strings only.
func validPayload(p []any) bool {
	if len(p) < 3 {
		return false
	}
	for _, v := range p {
		if _, ok := v.(string); !ok {
			return false
		}
	}
	added, err := strconv.Atoi(p[2].(string))
	if err != nil || added < 0 || added > len(p)-3 {
		return false
	}
	return (len(p)-3-added)%2 == 0
}

// prepareUndo makes u the undo call of c's ops that returned a payload; it
// reports false when there are none. ARGV is the header, the take's now,
// the slack, per op its fields and its payload's length, then the
// payloads.
func (s *Store) prepareUndo(u *call, ops []rules.Op, c *call) bool {
	n := c.len(ops)
	var idx []int
	npay := 0
	for j := range n {
		if c.pay[j] != nil {
			idx = append(idx, c.op(j))
			npay += len(c.pay[j])
		}
	}
	if idx == nil {
		return false
	}
	u.idx = idx
	nk, port := len(idx), false
	for _, i := range idx {
		if hasSet(&ops[i]) {
			nk++
		}
		port = port || needsPort(&ops[i])
	}
	nn := 3 + 6*len(idx)
	u.reserve(nk, nn, npay)
	u.args = append(u.args, "evalsha", shaArg, nk)
	ki := 0
	for _, i := range idx {
		u.args = append(u.args, s.keyArg(u, ki, &ops[i], false))
		ki++
		if hasSet(&ops[i]) {
			u.args = append(u.args, s.keyArg(u, ki, &ops[i], true))
			ki++
		}
	}
	u.nkeys = nk
	u.num(header(modeUndo, !s.callerClock, true, port, len(idx)))
	u.num(c.now)
	u.num(s.slackMS)
	for j := range n {
		if p := c.pay[j]; p != nil {
			s.appendOp(u, &ops[c.op(j)])
			u.num(int64(len(p)))
		}
	}
	for j := range n {
		u.args = append(u.args, c.pay[j]...)
	}
	return true
}

// decodeUndo checks an undo's reply and sets the Remaining and ResetAfter
// of its ops: the state after the undo. res is untouched on error.
func (u *call) decodeUndo(res []rules.Result) error {
	arr, ok := u.reply.([]any)
	if !ok || len(arr) != undoFields*len(u.idx) {
		return ErrMalformedReply
	}
	for _, v := range arr {
		if x, ok := v.(int64); !ok || x < 0 || x > maxReplyValue {
			return ErrMalformedReply
		}
	}
	for j, i := range u.idx {
		if res[i].Allowed { // a refused op shows none left (counter.Settle): an attempt's over its limit
			res[i].Remaining = arr[undoFields*j].(int64)
		}
		res[i].ResetAfter = rules.DurationUS(arr[undoFields*j+1].(int64))
	}
	return nil
}
