package memstore

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
	"math"

	"github.com/edge-gateway/edge/rules"
	"github.com/edge-gateway/edge/rules/counter"
)

// Snapshots carry a store's counters to the process that replaces it on a
// binary upgrade (docs/deploying.md, "Graceful restarts and binary
// upgrades"): a counter that is still refusing is never forgotten, not even
// by an upgrade. The format is versioned and self-checking:
//
//	header   "edge-memstore" (13 bytes), version (1 byte, snapshotVersion)
//	budget   'B', rule ID (8 bytes), kind (1 byte: 0 a rule's, 1 the shared one, 2 a rule's markers), max keys (uvarint)
//	entry    'E', budget index (uvarint, in the order budgets came), key (24 bytes),
//	         expiry (varint, µs since the epoch), network slot (uvarint, 0 for none),
//	         algorithm (1 byte), At, N, Prev (varints),
//	         len(Log) (uvarint), Log (varints: the first, then each step from the one before),
//	         len(Seen) (uvarint), Seen (member: 8 bytes little-endian, At: varint)
//	trailer  'Z', budgets (uvarint), entries (uvarint), CRC-32C of every byte before it (4 bytes, little-endian)
//
// Entries come in each shard's recency order, least recently used first,
// so that the restored store evicts in the same order. Times are absolute
// (µs since the Unix epoch, as rules.State holds them), so a snapshot
// taken on one host reads right on the same host's next process.
//
// Restore also reads version 1, which a build before marker budgets and
// network shares wrote: the same records without an entry's network slot,
// a budget's kind 0 or 1. Its markers come back among their rules'
// counters, and each moves to its rule's marker budget the first time an
// op of it reads it (Store.rehome); its keys count to no network. A
// network slot is a hash of the network under the key secret, which a
// binary upgrade hands over, so the restored keys count to the networks
// that made them.

const (
	snapshotMagic   = "edge-memstore"
	snapshotVersion = 2
	// snapshotV1 is the version before marker budgets.
	snapshotV1 = 1

	// MaxSnapshotKeys bounds the keys Restore reads: a corrupted count
	// stops there instead of filling memory. It is well over any budget a
	// policy can give (max_keys is an int32, and a node has few rules).
	MaxSnapshotKeys = 1 << 24
	// maxSnapshotBudgets bounds the budgets Restore reads: one per rule
	// that held a key (Snapshot writes no other), far more than a
	// policy has.
	maxSnapshotBudgets = 1 << 16
)

// ErrBadSnapshot wraps every error of Restore about the snapshot itself
// (as opposed to the reader's): a wrong magic or version, a record out of
// bounds, a checksum that does not match.
var ErrBadSnapshot = errors.New("memstore: bad snapshot")

// ErrNotEmpty is Restore's error for a store that already holds keys.
var ErrNotEmpty = errors.New("memstore: restoring into a store that is not empty")

// Snapshot writes every live key of s (its state, its expiry and its key
// budget) to w, in the format above, and returns the number of keys
// written. Keys already expired are left out: they read as fresh anyway.
//
// Each shard is copied under its own lock and written after it is
// released, so a Snapshot never holds up requests on w; a Take running
// meanwhile may land on either side of it, and a budget first seen after
// Snapshot started, or holding no key when it started, is left out with
// its keys. For a consistent cut, take it once the
// store is quiet (the binary upgrade takes it after the old process has
// stopped serving and drained its requests).
func (s *Store) Snapshot(w io.Writer) (keys int, err error) {
	nowUS := s.clock.Now().UnixMicro()
	cw := &crcWriter{w: bufio.NewWriterSize(w, 64<<10), h: crc32.New(crcTable)}

	s.budgetsMu.Lock()
	bs := make([]*budget, 0, len(s.budgets)+1)
	bs = append(bs, s.shared)
	for _, b := range s.budgets {
		// A budget holding no key has nothing to hand over (the next op
		// of its rule sets its bound again): a process that has seen
		// many rules come and go through reloads writes only the live ones.
		if b.n.Load() > 0 {
			bs = append(bs, b)
		}
	}
	s.budgetsMu.Unlock()
	index := make(map[*budget]uint64, len(bs))

	buf := make([]byte, 0, 4096)
	buf = append(buf, snapshotMagic...)
	buf = append(buf, snapshotVersion)
	for i, b := range bs {
		index[b] = uint64(i)
		buf = append(buf, 'B')
		buf = append(buf, b.id[:]...)
		buf = append(buf, b.kind())
		buf = binary.AppendUvarint(buf, uint64(max(b.max.Load(), 0)))
	}
	cw.write(buf)

	for i := range s.shards {
		sh := &s.shards[i]
		buf = buf[:0]
		sh.mu.Lock()
		parts := make([]*part, 0, len(sh.parts)+1)
		if sh.shared != nil {
			parts = append(parts, sh.shared)
		}
		parts = append(parts, sh.parts...)
		for _, p := range parts {
			bi, ok := index[p.b]
			if !ok {
				continue // a budget first seen, or first holding a key, after the list was taken
			}
			for e := p.tail; e != nil; e = e.prev {
				if e.expiresAt <= nowUS {
					continue
				}
				buf = appendEntry(buf, bi, e)
				keys++
			}
		}
		sh.mu.Unlock()
		cw.write(buf)
	}

	buf = append(buf[:0], 'Z')
	buf = binary.AppendUvarint(buf, uint64(len(bs)))
	buf = binary.AppendUvarint(buf, uint64(keys))
	cw.write(buf)
	cw.write(binary.LittleEndian.AppendUint32(nil, cw.h.Sum32()))
	if cw.err == nil {
		cw.err = cw.w.Flush()
	}
	if cw.err != nil {
		return keys, fmt.Errorf("writing the memory store's snapshot: %w", cw.err)
	}
	return keys, nil
}

func appendEntry(buf []byte, bi uint64, e *entry) []byte {
	buf = append(buf, 'E')
	buf = binary.AppendUvarint(buf, bi)
	buf = append(buf, e.key[:]...)
	buf = binary.AppendVarint(buf, e.expiresAt)
	buf = binary.AppendUvarint(buf, uint64(e.net))
	st := e.load()
	buf = append(buf, byte(st.Alg))
	buf = binary.AppendVarint(buf, st.At)
	buf = binary.AppendVarint(buf, st.N)
	buf = binary.AppendVarint(buf, st.Prev)
	buf = binary.AppendUvarint(buf, uint64(len(st.Log)))
	prev := int64(0)
	for _, t := range st.Log {
		buf = binary.AppendVarint(buf, t-prev)
		prev = t
	}
	buf = binary.AppendUvarint(buf, uint64(len(st.Seen)))
	for _, m := range st.Seen {
		buf = binary.LittleEndian.AppendUint64(buf, m.Member)
		buf = binary.AppendVarint(buf, m.At)
	}
	return buf
}

// Budget kinds in a snapshot's budget records.
const (
	kindRule    = 0
	kindShared  = 1
	kindMarkers = 2
)

func (b *budget) kind() byte {
	switch {
	case b.shared:
		return kindShared
	case b.markers:
		return kindMarkers
	}
	return kindRule
}

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// crcWriter writes to w and hashes what it wrote; the first error sticks.
type crcWriter struct {
	w   *bufio.Writer
	h   hash.Hash32
	err error
}

func (c *crcWriter) write(p []byte) {
	if c.err != nil {
		return
	}
	c.h.Write(p)
	_, c.err = c.w.Write(p)
}

// Restore reads a snapshot that Snapshot wrote, all of r up to its end,
// into s, which must hold no keys (ErrNotEmpty otherwise), and returns the
// number of keys restored.
// Keys that expired since the snapshot are left out. The budgets come back
// with their bounds (an op's MaxKeys sets its budget's bound again from its
// next new key, as after a reload) and their keys counted, so a restored
// budget is as full as it was.
//
// The whole snapshot is read and checked (every record within bounds:
// MaxSnapshotKeys keys, counter.MaxLogLimit timestamps and
// counter.MaxDistinctLimit members a key; the checksum) before anything is
// stored: a snapshot that fails leaves s empty, with an error wrapping
// ErrBadSnapshot (or the reader's error). It never panics on its input.
func (s *Store) Restore(r io.Reader) (keys int, err error) {
	if s.Len() > 0 {
		return 0, ErrNotEmpty
	}
	d := newSnapDecoder(r)
	bs, ents, err := d.decode()
	if err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			err = fmt.Errorf("%w: truncated after %d bytes", ErrBadSnapshot, d.n)
		}
		return 0, err
	}

	// Install. New's budgets are the snapshot's, by rule ID.
	nowUS := s.clock.Now().UnixMicro()
	budgets := make([]*budget, len(bs))
	s.budgetsMu.Lock()
	for i, sb := range bs {
		switch {
		case sb.shared:
			budgets[i] = s.shared
		default:
			id := budgetID{rule: binary.LittleEndian.Uint64(sb.id[:]), markers: sb.markers}
			b := s.budgets[id]
			if b == nil {
				b = &budget{id: sb.id, markers: sb.markers}
				s.budgets[id] = b
			}
			budgets[i] = b
		}
		if !sb.shared {
			// The shared budget keeps this store's Options.MaxKeys.
			budgets[i].max.Store(sb.max)
		}
	}
	s.budgetsMu.Unlock()
	for i := range ents {
		se := &ents[i]
		e := se.e
		if e.expiresAt <= nowUS {
			continue
		}
		b := budgets[se.budget]
		x := s.shardOf(&e.key)
		sh := &s.shards[x]
		sh.mu.Lock()
		if _, dup := sh.m[e.key]; dup {
			// Snapshot writes each key once, and the checksum holds: a
			// concurrent Take wrote it first.
			sh.mu.Unlock()
			continue
		}
		p, pi := sh.partForBudget(b)
		e.heapAt, e.part = e.expiresAt, pi
		if e.net != 0 {
			b.counts()[e.net].Add(1)
		}
		sh.m[e.key] = e
		p.pushFront(e)
		p.push(e)
		b.n.Add(1)
		sh.mu.Unlock()
		b.lower(e.expiresAt)
		keys++
	}
	return keys, nil
}

// partForBudget returns b's part in sh and the part's entry.part,
// creating the part. sh is locked.
func (sh *shard) partForBudget(b *budget) (*part, uint8) {
	if b.shared {
		if sh.shared == nil {
			sh.shared = newPart(b)
		}
		return sh.shared, 0
	}
	id := b.budgetID()
	for i, pid := range sh.partIDs {
		if pid == id {
			return sh.parts[i], partIndex(i)
		}
	}
	sh.partIDs = append(sh.partIDs, id)
	sh.parts = append(sh.parts, newPart(b))
	return sh.parts[len(sh.parts)-1], partIndex(len(sh.parts) - 1)
}

// snapBudget and snapEntry are a decoded snapshot's records.
type snapBudget struct {
	id              [8]byte
	shared, markers bool
	max             int64
}

type snapEntry struct {
	budget uint32 // its index in the snapshot's budgets
	e      *entry // key, st and expiresAt set
}

// snapDecoder reads a snapshot through its own buffer, hashing the bytes
// it consumed each time it refills (hashing byte by byte costs more than
// decoding).
type snapDecoder struct {
	src      io.Reader
	buf      []byte
	pos, end int // buf[pos:end] is read and not consumed
	hashed   int // buf[:hashed] is in h
	h        hash.Hash32
	n        int64 // bytes consumed
	rerr     error // the reader's error, once it gave one
}

func newSnapDecoder(r io.Reader) *snapDecoder {
	return &snapDecoder{src: r, buf: make([]byte, 64<<10), h: crc32.New(crcTable)}
}

// fill reads more, or returns the reader's error.
func (d *snapDecoder) fill() error {
	d.h.Write(d.buf[d.hashed:d.pos])
	d.end = copy(d.buf, d.buf[d.pos:d.end])
	d.pos, d.hashed = 0, 0
	for d.rerr == nil {
		m, err := d.src.Read(d.buf[d.end:])
		d.end += m
		d.rerr = err
		if m > 0 {
			return nil
		}
	}
	return d.rerr
}

func (d *snapDecoder) ReadByte() (byte, error) {
	for d.pos == d.end {
		if err := d.fill(); err != nil {
			return 0, err
		}
	}
	c := d.buf[d.pos]
	d.pos++
	d.n++
	return c, nil
}

// full reads len(p) bytes: io.EOF when there were none, io.ErrUnexpectedEOF
// when there were some.
func (d *snapDecoder) full(p []byte) error {
	for i := 0; i < len(p); {
		if d.pos == d.end {
			if err := d.fill(); err != nil {
				if errors.Is(err, io.EOF) && i > 0 {
					return io.ErrUnexpectedEOF
				}
				return err
			}
		}
		k := copy(p[i:], d.buf[d.pos:d.end])
		d.pos += k
		d.n += int64(k)
		i += k
	}
	return nil
}

// sum is the CRC of every byte consumed.
func (d *snapDecoder) sum() uint32 {
	d.h.Write(d.buf[d.hashed:d.pos])
	d.hashed = d.pos
	return d.h.Sum32()
}

func (d *snapDecoder) uvarint(what string, limit uint64) (uint64, error) {
	v, err := binary.ReadUvarint(d)
	if err != nil {
		return 0, d.bad(err, what)
	}
	if v > limit {
		return 0, fmt.Errorf("%w: %s %d exceeds %d", ErrBadSnapshot, what, v, limit)
	}
	return v, nil
}

func (d *snapDecoder) varint(what string) (int64, error) {
	v, err := binary.ReadVarint(d)
	if err != nil {
		return 0, d.bad(err, what)
	}
	return v, nil
}

// bad keeps the reader's errors (an EOF, which Restore reports as a
// truncation, among them) and turns any other, a varint's overflow, into
// ErrBadSnapshot.
func (d *snapDecoder) bad(err error, what string) error {
	if err == d.rerr || errors.Is(err, io.ErrUnexpectedEOF) {
		return err
	}
	return fmt.Errorf("%w: %s overflows", ErrBadSnapshot, what)
}

func (d *snapDecoder) decode() ([]snapBudget, []snapEntry, error) {
	head := make([]byte, len(snapshotMagic)+1)
	if err := d.full(head); err != nil {
		return nil, nil, err
	}
	if string(head[:len(snapshotMagic)]) != snapshotMagic {
		return nil, nil, fmt.Errorf("%w: not a memory store snapshot", ErrBadSnapshot)
	}
	version := head[len(snapshotMagic)]
	if version != snapshotVersion && version != snapshotV1 {
		return nil, nil, fmt.Errorf("%w: version %d, this build reads versions %d and %d", ErrBadSnapshot, version, snapshotV1, snapshotVersion)
	}
	var (
		bs   []snapBudget
		ents []snapEntry
	)
	for {
		tag, err := d.ReadByte()
		if err != nil {
			return nil, nil, err
		}
		switch tag {
		case 'B':
			if len(ents) > 0 || len(bs) >= maxSnapshotBudgets {
				return nil, nil, fmt.Errorf("%w: budget record %d out of place", ErrBadSnapshot, len(bs))
			}
			var b snapBudget
			var raw [9]byte
			if err := d.full(raw[:]); err != nil {
				return nil, nil, err
			}
			copy(b.id[:], raw[:8])
			switch raw[8] {
			case kindRule:
			case kindShared:
				b.shared = true
			case kindMarkers:
				b.markers = version >= 2
			}
			if raw[8] > kindMarkers || raw[8] == kindMarkers && !b.markers {
				return nil, nil, fmt.Errorf("%w: budget %d's kind is %d", ErrBadSnapshot, len(bs), raw[8])
			}
			m, err := d.uvarint("a budget's max keys", math.MaxInt32)
			if err != nil {
				return nil, nil, err
			}
			b.max = int64(m)
			bs = append(bs, b)
		case 'E':
			if len(ents) >= MaxSnapshotKeys {
				return nil, nil, fmt.Errorf("%w: more than %d keys", ErrBadSnapshot, MaxSnapshotKeys)
			}
			e, err := d.entry(bs, version)
			if err != nil {
				return nil, nil, err
			}
			ents = append(ents, e)
		case 'Z':
			nb, err := d.uvarint("the budget count", maxSnapshotBudgets)
			if err != nil {
				return nil, nil, err
			}
			ne, err := d.uvarint("the key count", MaxSnapshotKeys)
			if err != nil {
				return nil, nil, err
			}
			if nb != uint64(len(bs)) || ne != uint64(len(ents)) {
				return nil, nil, fmt.Errorf("%w: the trailer counts %d budgets and %d keys, the snapshot has %d and %d", ErrBadSnapshot, nb, ne, len(bs), len(ents))
			}
			want := d.sum()
			var sum [4]byte
			if err := d.full(sum[:]); err != nil {
				return nil, nil, err
			}
			if got := binary.LittleEndian.Uint32(sum[:]); got != want {
				return nil, nil, fmt.Errorf("%w: checksum %08x, the content sums to %08x", ErrBadSnapshot, got, want)
			}
			switch _, err := d.ReadByte(); {
			case err == nil:
				return nil, nil, fmt.Errorf("%w: bytes after the trailer", ErrBadSnapshot)
			case !errors.Is(err, io.EOF):
				return nil, nil, err
			}
			return bs, ents, nil
		default:
			return nil, nil, fmt.Errorf("%w: unknown record %q at byte %d", ErrBadSnapshot, tag, d.n-1)
		}
	}
}

// entry reads an entry record after its tag; bs are the budgets read.
// A key of a rule's budget starts with that rule's ID (Snapshot writes
// each key with the budget of its part, which partOf found by that ID), so
// one that does not is refused: the store finds some entries' parts by
// the ID their key starts with (partByKey).
func (d *snapDecoder) entry(bs []snapBudget, version byte) (snapEntry, error) {
	se := snapEntry{e: new(entry)}
	e := se.e
	bi, err := d.uvarint("a key's budget", math.MaxUint32)
	if err != nil {
		return se, err
	}
	if bi >= uint64(len(bs)) {
		return se, fmt.Errorf("%w: a key names budget %d of %d", ErrBadSnapshot, bi, len(bs))
	}
	se.budget = uint32(bi)
	if err := d.full(e.key[:]); err != nil {
		return se, err
	}
	if b := &bs[bi]; !b.shared && [8]byte(e.key[:8]) != b.id {
		return se, fmt.Errorf("%w: a key of rule %x names the budget of rule %x", ErrBadSnapshot, e.key[:8], b.id)
	}
	if e.expiresAt, err = d.varint("a key's expiry"); err != nil {
		return se, err
	}
	if version >= 2 {
		x, err := d.uvarint("a key's network slot", netSlots-1)
		if err != nil {
			return se, err
		}
		e.net = uint16(x)
	}
	alg, err := d.ReadByte()
	if err != nil {
		return se, err
	}
	if alg >= byte(counter.NumAlgorithms) {
		return se, fmt.Errorf("%w: algorithm %d", ErrBadSnapshot, alg)
	}
	st := rules.State{Alg: rules.Algorithm(alg)}
	for _, f := range []*int64{&st.At, &st.N, &st.Prev} {
		if *f, err = d.varint("a state's field"); err != nil {
			return se, err
		}
	}
	nl, err := d.uvarint("a log's length", counter.MaxLogLimit)
	if err != nil {
		return se, err
	}
	if nl > 0 {
		st.Log = make([]int64, nl)
		prev := int64(0)
		for i := range st.Log {
			step, err := d.varint("a log's timestamp")
			if err != nil {
				return se, err
			}
			if i > 0 && step < 0 {
				return se, fmt.Errorf("%w: a log's timestamps are not ascending", ErrBadSnapshot)
			}
			prev += step
			st.Log[i] = prev
		}
	}
	ns, err := d.uvarint("a distinct set's size", counter.MaxDistinctLimit)
	if err != nil {
		return se, err
	}
	if ns > 0 {
		st.Seen = make([]rules.Seen, ns)
		var raw [8]byte
		for i := range st.Seen {
			if err := d.full(raw[:]); err != nil {
				return se, err
			}
			st.Seen[i].Member = binary.LittleEndian.Uint64(raw[:])
			if st.Seen[i].At, err = d.varint("a member's time"); err != nil {
				return se, err
			}
		}
	}
	e.store(&st)
	return se, nil
}
