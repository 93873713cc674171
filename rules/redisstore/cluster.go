package redisstore

import (
	"context"
	"encoding/hex"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/edge-gateway/edge/rules"
)

// numSlots is Redis Cluster's hash slot count.
const numSlots = 16384

// slotOf returns the hash slot of k's keys: CRC16 (XMODEM) of the hash
// tag, which is the Key in hex (appendKey).
func slotOf(k *rules.Key) uint16 {
	var buf [hexKeyLen]byte
	hex.Encode(buf[:], k[:])
	return crc16(buf[:]) % numSlots
}

// crc16 is CRC-16/XMODEM (polynomial 0x1021, initial 0), Redis Cluster's
// key hash.
func crc16(b []byte) uint16 {
	var crc uint16
	for _, c := range b {
		crc ^= uint16(c) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc
}

// takeCluster is Take on a Redis Cluster. Ops of one hash slot go in one
// script call, atomic; the calls of one master are pipelined, and the
// masters are called in parallel: one round trip. When a slot refuses the
// request, a second round trip undoes what the other slots took (the
// package doc's error bound).
func (s *Store) takeCluster(ctx context.Context, ops []rules.Op, res []rules.Result, nowUS int64) error {
	var slotBuf [16]uint16
	slots := slotBuf[:0]
	single := true
	for i := range ops {
		slots = append(slots, slotOf(&ops[i].Key))
		single = single && slots[i] == slots[0]
	}
	if single {
		w := s.getWaiter()
		defer s.putWaiter(w)
		s.prepare(&w.call, ops, nil, nowUS, false)
		n, err := s.masterFor(ctx, w.keyString(0))
		if err != nil {
			return err
		}
		w.run(ctx, s, n)
		if w.err != nil {
			s.reloadOnRedirect(ctx, w.err)
			return w.err
		}
		return w.decode(ops, res, s.callerNow(&nowUS))
	}
	s.crossSlot.Add(1)

	// One batch per slot, ops in call order; route each before sending
	// anything, so that a routing failure charges nothing.
	var batches []*call
	done := make([]bool, len(ops))
	for i := range ops {
		if done[i] {
			continue
		}
		var idx []int
		for j := i; j < len(ops); j++ {
			if !done[j] && slots[j] == slots[i] {
				idx = append(idx, j)
				done[j] = true
			}
		}
		b := &call{}
		s.prepare(b, ops, idx, nowUS, true)
		n, err := s.masterFor(ctx, b.keyString(0))
		if err != nil {
			return err
		}
		b.node = n
		batches = append(batches, b)
	}
	s.runAll(ctx, batches)

	// A slot that failed fails the call; the slots that answered keep what
	// they took (package doc).
	for _, b := range batches {
		if b.err != nil {
			s.reloadOnRedirect(ctx, b.err)
			return b.err
		}
	}
	for _, b := range batches {
		if err := b.decode(ops, res, s.callerNow(&nowUS)); err != nil {
			return err
		}
	}
	if !rules.Refused(ops, res) {
		return nil
	}

	var undos []*call
	for _, b := range batches {
		u := &call{node: b.node}
		if s.prepareUndo(u, ops, b) {
			undos = append(undos, u)
		}
	}
	if len(undos) == 0 {
		return nil
	}
	s.undos.Add(1)
	if s.beforeUndo != nil {
		s.beforeUndo()
	}
	s.runAll(ctx, undos)
	for _, u := range undos {
		if u.err != nil || u.decodeUndo(res) != nil {
			// The request is refused whatever the undo's fate; its units
			// stay taken until the keys decay.
			s.undoErrors.Add(1)
		}
	}
	return nil
}

// runAll runs the calls, one pipeline per node, the nodes in parallel.
func (s *Store) runAll(ctx context.Context, bs []*call) {
	type group struct {
		node scripter
		bs   []*call
	}
	var groups []group
next:
	for _, b := range bs {
		for i := range groups {
			if groups[i].node == b.node {
				groups[i].bs = append(groups[i].bs, b)
				continue next
			}
		}
		groups = append(groups, group{b.node, []*call{b}})
	}
	run := func(g group) {
		if len(g.bs) == 1 {
			g.bs[0].run(ctx, s, g.node)
			return
		}
		s.pipeline(ctx, g.node, g.bs)
	}
	var wg sync.WaitGroup
	for _, g := range groups[1:] {
		wg.Go(func() { run(g) })
	}
	run(groups[0])
	wg.Wait()
}

// pipeline sends several script calls to one node in one round trip. Calls
// answered NOSCRIPT did not run and are sent again by EVAL.
func (s *Store) pipeline(ctx context.Context, n scripter, bs []*call) {
	p, ok := n.(pipeliner)
	if !ok {
		for _, b := range bs {
			b.run(ctx, s, n)
		}
		return
	}
	pipe := p.Pipeline()
	for _, b := range bs {
		_ = pipe.Process(ctx, b.command())
	}
	_, _ = pipe.Exec(ctx) // each command carries its own error
	for _, b := range bs {
		b.node = n
		b.reply, b.err = b.cmd.Val(), b.cmd.Err()
		if b.err != nil && redis.HasErrorPrefix(b.err, "NOSCRIPT") {
			s.sawNoScript(1)
			cmd := b.evalCommand()
			_ = n.Process(ctx, cmd)
			b.reply, b.err = cmd.Val(), cmd.Err()
		}
	}
}

// reloadOnRedirect refreshes the cluster's slot map (in the background)
// after a MOVED or ASK: the slot has moved, the script did not run, and the
// next call must go to the new owner.
func (s *Store) reloadOnRedirect(ctx context.Context, err error) {
	if s.cluster != nil && (redis.HasErrorPrefix(err, "MOVED") || redis.HasErrorPrefix(err, "ASK")) {
		s.cluster.ReloadState(ctx)
	}
}
