package redisstore

import (
	"context"
	"encoding/hex"
	"strconv"
	"time"

	"github.com/edge-gateway/edge/rules"
)

// Script modes and the sizes of the script's replies (take.lua's header).
const (
	modeTake = 0
	modeUndo = 1

	resultFields = 4 // allowed, remaining, reset_after_us, retry_after_us
	undoFields   = 2 // remaining, reset_after_us

	hexKeyLen = 2 * len(rules.Key{})
	logSuffix = ":log"

	// maxReplyValue bounds every number a reply may carry: the script's
	// values are exact integers under 2^53 (rules.MaxExact).
	maxReplyValue = rules.MaxExact
)

// batch is one script call: the ops of one hash slot (on a single Redis,
// all of a Take's ops).
type batch struct {
	idx  []int // the call's op indexes, in order; nil: all of them
	keys []string
	args []any
	undo bool // a take returning undo payloads (a cross-slot call)

	node  scripter
	reply any
	err   error

	now int64   // µs, the time the script decided at
	pay [][]any // per op of the batch: its undo payload, nil when none
}

// len and op map the batch's j-th op to the call's.
func (b *batch) len(ops []rules.Op) int {
	if b.idx == nil {
		return len(ops)
	}
	return len(b.idx)
}

func (b *batch) op(j int) int {
	if b.idx == nil {
		return j
	}
	return b.idx[j]
}

// appendKey appends k's Redis key: the prefix and the Key in hex inside a
// hash tag, so that a sliding_log's sorted set (the same name plus
// logSuffix) lives in the same hash slot. The Key is already a keyed hash
// of its values (rules.Key), so no request input reaches Redis raw.
func (s *Store) appendKey(dst []byte, k *rules.Key) []byte {
	dst = append(dst, s.prefix...)
	dst = append(dst, '{')
	dst = hex.AppendEncode(dst, k[:])
	return append(dst, '}')
}

// keyName returns k's Redis key.
func (s *Store) keyName(k *rules.Key) string {
	return string(s.appendKey(make([]byte, 0, len(s.prefix)+hexKeyLen+2), k))
}

// setKeys fills b.keys for the batch's ops (two keys for a sliding_log),
// from one string.
func (s *Store) setKeys(b *batch, ops []rules.Op) {
	n := b.len(ops)
	nk := n
	for j := range n {
		if ops[b.op(j)].Algorithm == rules.SlidingLog {
			nk++
		}
	}
	keyLen := len(s.prefix) + hexKeyLen + 2
	buf := make([]byte, 0, nk*keyLen+(nk-n)*len(logSuffix))
	for j := range n {
		op := &ops[b.op(j)]
		buf = s.appendKey(buf, &op.Key)
		if op.Algorithm == rules.SlidingLog {
			buf = s.appendKey(buf, &op.Key)
			buf = append(buf, logSuffix...)
		}
	}
	all := string(buf)
	b.keys = make([]string, 0, nk)
	at := 0
	for j := range n {
		b.keys = append(b.keys, all[at:at+keyLen])
		at += keyLen
		if ops[b.op(j)].Algorithm == rules.SlidingLog {
			b.keys = append(b.keys, all[at:at+keyLen+len(logSuffix)])
			at += keyLen + len(logSuffix)
		}
	}
}

// header is ARGV[1]: mode + 2×flag + 4×ops.
func header(mode int64, flag bool, ops int) int64 {
	if flag {
		mode += 2
	}
	return mode + 4*int64(ops)
}

// opCode is an op's first field: kind + 8×algorithm + 64×enforce +
// 128×attempts (one number: each costs the script a conversion).
func opCode(op *rules.Op) int64 {
	code := int64(op.Kind) + 8*int64(op.Algorithm)
	if op.Enforce {
		code += 64
	}
	if op.Attempts {
		code += 128
	}
	return code
}

// appendOp appends op's fields: its code, limit, burst, period and cost.
func appendOp(a []any, op *rules.Op) []any {
	return append(a, opCode(op), op.Limit, op.Burst, op.PeriodUS, op.Cost)
}

// prepare makes b the take call of ops[idx] (all ops when idx is nil) at
// nowUS (-1: the server's TIME); undo asks for undo payloads.
func (s *Store) prepare(b *batch, ops []rules.Op, idx []int, nowUS int64, undo bool) {
	b.idx, b.undo = idx, undo
	s.setKeys(b, ops)
	n := b.len(ops)
	a := make([]any, 0, 3+5*n)
	a = append(a, header(modeTake, undo, n), nowUS, s.slackMS)
	for j := range n {
		a = appendOp(a, &ops[b.op(j)])
	}
	b.args = a
}

func (b *batch) run(ctx context.Context, s *Store, n scripter) {
	b.node = n
	b.reply, b.err = s.eval(ctx, n, b.keys, b.args)
}

// decode checks a take's reply and fills res for the batch's ops. Every
// element is type-checked and range-checked: a malformed reply is
// ErrMalformedReply, never a panic, and res is untouched then.
func (b *batch) decode(ops []rules.Op, res []rules.Result, callerNowUS *int64) error {
	n := b.len(ops)
	want := 1 + resultFields*n
	if b.undo {
		want += n
	}
	arr, ok := b.reply.([]any)
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
	if b.undo {
		b.pay = make([][]any, n)
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
				b.pay[j] = p
			default:
				return ErrMalformedReply
			}
		}
	}
	b.now = now
	for j := range n {
		f := arr[1+resultFields*j : 1+resultFields*(j+1)]
		retry := f[3].(int64)
		r := rules.Result{
			Allowed:    f[0].(int64) == 1,
			Remaining:  f[1].(int64),
			ResetAfter: durationUS(f[2].(int64)),
		}
		switch {
		case retry < 0:
			r.RetryAfter = rules.RetryNever
		default:
			r.RetryAfter = durationUS(retry)
		}
		res[b.op(j)] = r
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

// prepareUndo makes u the undo call of b's ops that returned a payload; it
// reports false when there are none.
func (s *Store) prepareUndo(u *batch, ops []rules.Op, b *batch) bool {
	n := b.len(ops)
	var idx []int
	npay := 0
	for j := range n {
		if b.pay[j] != nil {
			idx = append(idx, b.op(j))
			npay += len(b.pay[j])
		}
	}
	if idx == nil {
		return false
	}
	u.idx = idx
	s.setKeys(u, ops)
	args := make([]any, 0, 3+6*len(idx)+npay)
	args = append(args, header(modeUndo, !s.callerClock, len(idx)), b.now, s.slackMS)
	for j := range n {
		if p := b.pay[j]; p != nil {
			args = appendOp(args, &ops[b.op(j)])
			args = append(args, int64(len(p)))
		}
	}
	for j := range n {
		args = append(args, b.pay[j]...)
	}
	u.args = args
	return true
}

// decodeUndo checks an undo's reply and sets the Remaining and ResetAfter
// of its ops: the state after the undo. res is untouched on error.
func (u *batch) decodeUndo(res []rules.Result) error {
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
		res[i].Remaining = arr[undoFields*j].(int64)
		res[i].ResetAfter = durationUS(arr[undoFields*j+1].(int64))
	}
	return nil
}

func durationUS(v int64) time.Duration { return time.Duration(v) * time.Microsecond }
