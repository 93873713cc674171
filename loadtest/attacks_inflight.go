package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/edge-gateway/edge/demo"
	"github.com/edge-gateway/edge/nat"
	"github.com/edge-gateway/edge/rules"
)

// The in-flight class: one client tries to have more than a concurrency
// rule's limit of logins at the origin at once (docs/policy.md,
// "Concurrency limits"). The demo origin holds every login it receives
// (POST /__origin/hold?path=/login) and reports how many requests it has
// in flight and its peak (GET /__origin/inflight, reset before each case
// by POST /__origin/inflight/reset), read on its own port as the other
// classes read it. A case's gain is that peak: the most of the client's
// logins the origin had at one instant. Its bound is the sum over the
// concurrency keys the logins fall on of min(logins, limit), read from the
// policy's model (the rule's op as the Engine builds it), never written
// here: one client, one key, limit.
//
// Each case ends with a second line, CASE-leaked: once everything held was
// released and the origin has nothing in flight, a fresh wave of limit
// logins (retrying refusals) must all be at the origin again within a hang
// guard, and one more refused; the gain is the slots that did not come
// back, bound 0. A request the origin did not answer within
// upstream_timeout keeps its slot until its lease ends (the origin may
// still be working on it), so after timeouts the wave waits for the lease;
// past -lease-wait that line is skipped and says so.

// Pacing of the in-flight class. None of these decides a verdict: a
// condition is polled until it holds, under a hang guard.
const (
	// inflightPoll is how often the class reads the origin's in-flight
	// report while it waits for a wave to settle, and how long a refused
	// login of the fresh wave waits before it is sent again.
	inflightPoll = 20 * time.Millisecond
	// inflightGuard is the hang guard of every wait beyond what the
	// policy's own durations (upstream_timeout, lease) already explain.
	inflightGuard = 15 * time.Second
	// defaultLeaseWait is -lease-wait's default.
	defaultLeaseWait = time.Minute
)

// inflightPath is the path the class holds at the origin and logs in at.
const inflightPath = "/login"

// inflightSpelling is one way of sending a login that the edge and the
// demo origin both read as POST /login (loginSpellings, overrideCases).
type inflightSpelling struct {
	method, target string
	override       *header
}

var inflightSpellings = []inflightSpelling{
	{fasthttp.MethodPost, "/login", nil},
	{fasthttp.MethodPost, "//login", nil},
	{fasthttp.MethodPost, "/%6Cogin", nil},
	{fasthttp.MethodPost, "/LOGIN", nil},
	{fasthttp.MethodPost, "/login/", nil},
	{fasthttp.MethodPost, "/./login", nil},
	{fasthttp.MethodGet, "/login", &header{"X-HTTP-Method-Override", "POST"}},
}

// inflightCaseSpec is one case of the class.
type inflightCaseSpec struct {
	name string
	why  string // what the case does, for the gain's note
	// spellings rotates the login's spelling and the client's interface
	// ID within its /64 on every request.
	spellings bool
	// timeouts lets the held wave time out at the edge (504) before the
	// second wave; hangUp closes the held wave's connections instead.
	timeouts, hangUp bool
}

var inflightCases = []inflightCaseSpec{
	{name: "parallel", why: "2 × limit logins at once, one connection each"},
	{name: "spellings", why: "2 × limit logins at once, each from a new interface ID in one /64, in 7 spellings of POST /login (paths and a method override)", spellings: true},
	{name: "timeouts", why: "2 × limit logins at once, the held ones left to time out at the edge (504), then limit more", timeouts: true},
	{name: "hang-ups", why: "2 × limit logins at once, the client hanging up on the held ones, then limit more", hangUp: true},
}

// inflightLimit is the enforcing concurrency limit a canonical login from
// a fresh client meets (the least, when several rules hold it), and the
// rule's lease; ok is false when none holds it.
func (a *attackRun) inflightLimit() (limit int64, lease time.Duration, name string, ok bool, err error) {
	client := a.v6Client()
	v, err := a.m.decide(a.loginCanon(client, loginFields(a.account("probe"), 0)))
	if err != nil || v.refused {
		return 0, 0, "", false, err
	}
	for _, c := range v.inflight {
		if !ok || c.op.Limit < limit {
			limit, lease, name, ok = c.op.Limit, time.Duration(c.op.PeriodUS)*time.Microsecond, c.name, true
		}
	}
	return limit, lease, name, ok, nil
}

// inflightRounds is the most rounds of the fresh wave one case may send:
// the hang guard after the longest wait (a lease) over the poll interval.
func inflightRounds(lease time.Duration) int64 {
	return int64((lease+inflightGuard)/inflightPoll) + 1
}

func inflightRequests(a *attackRun) int64 {
	limit, lease, _, ok, err := a.inflightLimit()
	if err != nil || !ok {
		return 0
	}
	var mint int64
	if v := nat.ConfigOf(a.m.p); v != nil {
		mint = int64(v.MintLimit)
	}
	// Per case: the visitor IDs, 2 × limit at once, limit more, the fresh
	// wave's rounds of at most limit each, and one more.
	per := mint + 3*limit + inflightRounds(lease)*limit + 1
	return int64(len(inflightCases)) * per
}

// inflightCred is one (visitor ID, account) pair of a case's logins, with
// the logins charged to it: sent and not (yet) refused.
type inflightCred struct {
	visitor, account string
	charged          int64
}

// inflightRun is one case being run.
type inflightRun struct {
	a      *attackRun
	tc     *tcase
	spec   inflightCaseSpec
	limit  int64
	lease  time.Duration
	site   netip.Prefix // the client's /48
	s56    byte
	s64    byte
	fixed  netip.Addr // the client, when it does not rotate
	creds  []inflightCred
	budget int64 // logins per cred before a rate limit refuses

	seq      int
	verdicts []canonVerdict // every counted login, for the bound
	got504   bool
	atNow    int64 // the origin's logins in flight, as last read
	spent    bool  // every cred reached its budget: launch sent fewer
	hungUp   int   // logins the case hung up on
}

// flight is one login on a connection of its own.
type flight struct {
	cred *inflightCred
	conn *rawConn
	nc   net.Conn // the connection, to hang up from another goroutine
	done chan flightAnswer
	ans  *flightAnswer // once received
}

type flightAnswer struct {
	ans rawAnswer
	err error
	at  time.Time
}

// runInFlight runs the in-flight class.
func runInFlight(a *attackRun) error {
	limit, lease, rule, ok, err := a.inflightLimit()
	if err != nil {
		return err
	}
	if !ok {
		a.skip("in-flight", "", fmt.Sprintf("no enforcing concurrency rule of the policy %s holds POST /login (algorithm = \"concurrency\")", a.p.policy))
		return nil
	}
	rep, err := a.origin.inflight(a.ctx)
	if err != nil {
		return err
	}
	if rep.Held > 0 || rep.ByPath[inflightPath] > 0 {
		return fmt.Errorf("the origin has %d requests held and %d at %s before the class: other traffic reached it; run again on a quiet node", rep.Held, rep.ByPath[inflightPath], inflightPath)
	}
	fmt.Fprintf(a.out, "    %s: limit %d in flight per key, lease %v; the edge's upstream_timeout %v\n", rule, limit, lease, a.m.p.UpstreamTimeout)
	// Whatever happens, the origin stops holding at the end: the classes
	// after this one (and a node's other users) expect answers.
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), a.cfg.timeout)
		defer cancel()
		_ = a.origin.post(ctx, "/__origin/hold", fasthttp.MethodDelete)
	}()
	for _, spec := range inflightCases {
		if err := a.inflightCase(spec, limit, lease); err != nil {
			return err
		}
	}
	return nil
}

// inflightCase runs one case: the visitor IDs and accounts, the held wave,
// the case's middle (timeouts, hang-ups), the second wave, the release and
// the fresh wave.
func (a *attackRun) inflightCase(spec inflightCaseSpec, limit int64, lease time.Duration) error {
	ir := &inflightRun{a: a, spec: spec, limit: limit, lease: lease, site: a.v6Site(),
		s56: byte(a.rng.Uint32()), s64: byte(a.rng.Uint32())}
	ir.fixed = v6In(ir.site, ir.s56, ir.s64, a.rng.Uint64()|1)
	// Played once the origin answers again: the known browser behind the
	// client and a new one elsewhere in its /48 log in (the slots the
	// attack held are back; a neighbour's are its own throughout).
	cs, err := a.castAround(ir.fixed, v6In(ir.site, ir.s56^0x80, ir.s64, a.rng.Uint64()|1), actLogin, actLogin)
	if err != nil {
		return err
	}
	cs.bs = slices.DeleteFunc(cs.bs, func(b *bystander) bool { return b.kind == freshBehind })
	tc, err := a.begin("in-flight", spec.name)
	if err != nil {
		return err
	}
	ir.tc = tc
	if why, err := ir.prepare(); err != nil || why != "" {
		if why != "" {
			a.skip("in-flight", spec.name, why)
			a.skip("in-flight", spec.name+"-leaked", why)
		}
		return err
	}
	o := a.origin
	if err := o.post(a.ctx, "/__origin/hold?path="+inflightPath, fasthttp.MethodPost); err != nil {
		return err
	}
	if err := o.post(a.ctx, "/__origin/inflight/reset", fasthttp.MethodPost); err != nil {
		return err
	}
	t0 := time.Now() // every lease the case takes is taken after t0

	// The held wave: 2 × limit at once.
	wave1, err := ir.launch(int(2 * limit))
	if err != nil {
		return err
	}
	if err := ir.settle(wave1, 0, inflightGuard); err != nil {
		return err
	}
	held := ir.atNow
	switch {
	case spec.timeouts:
		// Every forwarded login of the wave answers 504 after
		// upstream_timeout; the origin still holds them.
		if err := ir.waitAll(wave1, a.m.p.UpstreamTimeout+inflightGuard); err != nil {
			return err
		}
	case spec.hangUp:
		for _, f := range wave1 {
			if f.ans == nil {
				f.nc.Close()
			}
		}
		if err := ir.waitAll(wave1, inflightGuard); err != nil {
			return err
		}
	}
	var wave2 []*flight
	if spec.timeouts || spec.hangUp {
		base, err := ir.originLogins()
		if err != nil {
			return err
		}
		if wave2, err = ir.launch(int(limit)); err != nil {
			return err
		}
		if err := ir.settle(wave2, base, inflightGuard); err != nil {
			return err
		}
	}
	tHeld := time.Now() // the held phase ends: nothing more is admitted until the release

	// The release: the origin answers everything it held and has nothing
	// in flight at /login before the fresh wave.
	if err := o.post(a.ctx, "/__origin/release", fasthttp.MethodPost); err != nil {
		return err
	}
	all := append(append([]*flight(nil), wave1...), wave2...)
	if err := ir.waitAll(all, inflightGuard); err != nil {
		return err
	}
	if err := ir.waitOriginIdle(inflightGuard); err != nil {
		return err
	}
	var lastDecided time.Time // the latest answer of a forwarded login
	for _, f := range all {
		if f.ans.at.After(lastDecided) {
			lastDecided = f.ans.at
		}
	}

	// The fresh wave: limit logins, each sent again while refused, must
	// all be at the origin at once; then one more is refused.
	leakName := spec.name + "-leaked"
	var leaked int64 = -1
	leakNote, leakSkip := "", ""
	spentWhy := fmt.Sprintf("the client's login budget was spent before the fresh wave: the edge let more of its logins through than the limit of %d the case plans for", limit)
	start, guard := time.Now(), inflightGuard
	switch {
	case ir.room() < limit:
		leakSkip = spentWhy
	case ir.got504 && lease > a.p.leaseWait:
		leakSkip = fmt.Sprintf("logins timed out at the edge, so their slots come back when their lease (%v) ends, over -lease-wait %v: not waited for", lease, a.p.leaseWait)
	case ir.got504:
		// Their leases end no later than lease after the last answer of a
		// forwarded login (each was decided before it was answered), and
		// no earlier than lease after t0: the wave starts then, and its
		// guard runs from the latest end.
		start = t0.Add(lease)
		guard = time.Until(lastDecided.Add(lease+clockAllowance)) + inflightGuard
	}
	var fresh []*flight
	if leakSkip == "" {
		if d := time.Until(start); d > 0 {
			t := time.NewTimer(d)
			select {
			case <-t.C:
			case <-a.ctx.Done():
				t.Stop()
				return a.ctx.Err()
			}
		}
		fresh, leaked, err = ir.freshWave(guard)
		if err != nil {
			return err
		}
		leakNote = fmt.Sprintf("slots of the %d that did not come back: of a fresh wave of %d logins sent again while refused, %d were at the origin at once (hang guard %v)", limit, limit, limit-leaked, guard.Round(time.Millisecond))
		if leaked < 0 {
			leakSkip = spentWhy
		}
		if leaked == 0 {
			base, err := ir.originLogins()
			if err != nil {
				return err
			}
			extra, err := ir.launch(1)
			if err != nil {
				return err
			}
			if err := ir.settle(extra, base, inflightGuard); err != nil {
				return err
			}
			fresh = append(fresh, extra...)
			if len(extra) > 0 {
				leakNote += fmt.Sprintf(", and one more got %s", ir.answerWord(extra[0]))
			}
		}
		if err := o.post(a.ctx, "/__origin/release", fasthttp.MethodPost); err != nil {
			return err
		}
		if err := ir.waitAll(fresh, inflightGuard); err != nil {
			return err
		}
		if err := ir.waitOriginIdle(inflightGuard); err != nil {
			return err
		}
	}
	if err := o.post(a.ctx, "/__origin/hold", fasthttp.MethodDelete); err != nil {
		return err
	}

	rep, err := o.inflight(a.ctx)
	if err != nil {
		return err
	}
	if _, err := tc.reachedAll(nil); err != nil {
		return err
	}
	if leakSkip != "" {
		// The concurrency rule holds the client's address, the known
		// browser's too, until the slots come back: unmeasured.
		cs = noBystanders("not played: the client's slots were not seen back (" + leakName + " skipped)")
	}
	if err := tc.play(cs); err != nil {
		return err
	}
	tc.res.coll = cs.collateral()
	tc.res.gain = rep.Peak
	tc.res.note = fmt.Sprintf("the origin's in-flight peak over the case: %s; %d of the first wave were held at the origin at once", spec.why, held)
	if ir.hungUp > 0 {
		tc.res.note += fmt.Sprintf(", %d hung up on", ir.hungUp)
	}
	tc.res.bound = ir.bound(tHeld.Sub(t0))
	a.results = append(a.results, tc.res)
	writeAttackResult(a.out, &tc.res)
	if n := tc.res.statuses[fasthttp.StatusServiceUnavailable]; n > 0 {
		a.warn("%s: %d of %d answers were 503: the edge could not decide them or shed them, so the case's gain says nothing of its bound", tc.res.name, n, tc.res.sent)
	}
	if spec.name == "parallel" && tc.res.gain < tc.res.bound.bound {
		a.warn("%s, the canonical request of its class, had %d at the origin at once, under its bound %d: slots an earlier run left, or a node stricter than %s; the class's gains may understate",
			tc.res.name, tc.res.gain, tc.res.bound.bound, a.p.policy)
	}
	if leakSkip != "" {
		a.skip("in-flight", leakName, leakSkip)
	}
	if leaked >= 0 {
		r := caseResult{name: caseName("in-flight", leakName), gain: leaked,
			bound: caseBoundResult{0, "every slot is given back when the origin answers, or when the lease of a request the edge gave up on ends (docs/policy.md, \"Concurrency limits\")"},
			note:  leakNote, statuses: map[int]int64{}}
		r.coll.lines = []string{"played with in-flight/" + spec.name}
		for _, f := range fresh {
			r.sent++
			if f.ans != nil && f.ans.err == nil {
				r.statuses[f.ans.ans.status]++
			}
		}
		a.results = append(a.results, r)
		writeAttackResult(a.out, &r)
	}
	return nil
}

// prepare collects the case's visitor IDs and accounts, and works out each
// one's login budget from the policy: it returns why the case cannot run,
// or "".
func (ir *inflightRun) prepare() (string, error) {
	a := ir.a
	// The most logins charged at once: the held wave's limit kept, and the
	// fresh wave's limit and one more; the first wave, 2 × limit.
	need := 2*ir.limit + 1
	// One cred alone, and two, show which budgets are a cred's own and
	// which the client's.
	vc := nat.ConfigOf(a.m.p)
	credCanon := func(visitor string) canonReq {
		c := a.loginCanon(ir.fixed, loginFields(a.account("inflight"), 0))
		if vc != nil {
			c.visitor = visitor
		}
		return c
	}
	one, err := a.m.decide(credCanon("model-visitor-1"))
	if err != nil {
		return "", err
	}
	two, err := a.m.decide(credCanon("model-visitor-2"))
	if err != nil {
		return "", err
	}
	perCred, shared := int64(1<<62), int64(1<<62)
	now := time.Now()
	for _, c := range one.cons {
		al := allowance(c.op, now, now)
		if slices.ContainsFunc(two.cons, func(d constraint) bool { return d.role == c.role && d.key == c.key }) {
			shared = min(shared, al)
		} else {
			perCred = min(perCred, al)
		}
	}
	var ids []string
	if vc != nil {
		// A visitor's budget is its own only with its own ID: the
		// cookieless bucket is the IP's.
		want := int((need + perCred - 1) / max(perCred, 1))
		c := a.conn(netip.Addr{})
		defer c.close()
		for range min(int64(want+1), vc.MintLimit) {
			r := a.request(fasthttp.MethodGet, mintTarget)
			a.clientHeader(r, ir.fixed)
			ans, err := ir.tc.sendUncounted(c, r)
			if err != nil {
				return "", err
			}
			if ans.cookie != "" && !slices.Contains(ids, ans.cookie) {
				ids = append(ids, ans.cookie)
			}
		}
		if len(ids) == 0 {
			return fmt.Sprintf("the edge minted no visitor ID for the client, and its cookieless login budget (%d) is under the %d logins the case needs at once", perCred, need), nil
		}
		for _, id := range ids {
			ir.creds = append(ir.creds, inflightCred{visitor: id, account: a.account("inflight")})
		}
	} else {
		for range (need + perCred - 1) / max(perCred, 1) {
			ir.creds = append(ir.creds, inflightCred{account: a.account("inflight")})
		}
	}
	ir.budget = perCred
	if shared < need || perCred*int64(len(ir.creds)) < need {
		return fmt.Sprintf("the policy's login rate limits leave the client %d logins (%d per visitor ID and account, %d IDs; %d in all) under the %d the case needs to test a concurrency limit of %d",
			min(shared, perCred*int64(len(ir.creds))), perCred, len(ir.creds), shared, need, ir.limit), nil
	}
	return "", nil
}

// room is how many more logins the case's creds can be charged.
func (ir *inflightRun) room() int64 {
	var n int64
	for _, c := range ir.creds {
		n += max(0, ir.budget-c.charged)
	}
	return n
}

// client is the address login i comes from.
func (ir *inflightRun) client(i int) netip.Addr {
	if ir.spec.spellings {
		return v6In(ir.site, ir.s56, ir.s64, ir.a.rng.Uint64()|1)
	}
	return ir.fixed
}

// launch sends n logins at once, each on a connection of its own, each on
// the cred least charged. It sends fewer when every cred is at its budget
// (the edge let more logins through than the case planned for: a limit it
// does not enforce), and says so in ir.spent.
func (ir *inflightRun) launch(n int) ([]*flight, error) {
	a := ir.a
	fs := make([]*flight, 0, n)
	for range n {
		cred := &ir.creds[0]
		for k := range ir.creds {
			if ir.creds[k].charged < cred.charged {
				cred = &ir.creds[k]
			}
		}
		if cred.charged >= ir.budget {
			ir.spent = true
			break
		}
		cred.charged++
		i := ir.seq
		ir.seq++
		sp := inflightSpellings[0]
		if ir.spec.spellings {
			sp = inflightSpellings[i%len(inflightSpellings)]
		}
		client := ir.client(i)
		r, fields := a.loginRequest(sp.method, sp.target, cred.account, i)
		if sp.override != nil {
			r.add(sp.override.name, sp.override.value)
		}
		a.clientHeader(r, client)
		canon := a.loginCanon(client, fields)
		if cred.visitor != "" {
			r.add("Cookie", a.cookie+"="+cred.visitor)
			canon.visitor = cred.visitor
		}
		r.tag = a.tag()
		v, err := a.m.decide(canon)
		if err != nil {
			return nil, err
		}
		ir.verdicts = append(ir.verdicts, v)
		// A held login waits for the edge's answer up to its
		// upstream_timeout, then -timeout as any request.
		c := newRawConn(a.cfg.target.addr, netip.Addr{}, a.m.p.UpstreamTimeout+a.cfg.timeout, a.cookie)
		if err := c.dial(a.ctx); err != nil {
			return nil, err
		}
		f := &flight{cred: cred, conn: c, nc: c.c, done: make(chan flightAnswer, 1)}
		if ir.tc.first.IsZero() {
			ir.tc.first = time.Now()
		}
		go func() {
			ans, err := c.do(a.ctx, r)
			c.close()
			f.done <- flightAnswer{ans: ans, err: err, at: time.Now()}
		}()
		fs = append(fs, f)
	}
	return fs, nil
}

// collect takes in the answers that have arrived; it returns how many of
// fs have one.
func (ir *inflightRun) collect(fs []*flight) int {
	n := 0
	for _, f := range fs {
		if f.ans == nil {
			select {
			case fa := <-f.done:
				ir.record(f, fa)
			default:
			}
		}
		if f.ans != nil {
			n++
		}
	}
	return n
}

// record books an answer: counts, the cred's charge back when refused.
func (ir *inflightRun) record(f *flight, fa flightAnswer) {
	f.ans = &fa
	tc := ir.tc
	tc.last = fa.at
	ir.a.sent++
	tc.res.sent++
	if fa.err != nil {
		if ir.spec.hangUp {
			ir.hungUp++
		}
		return // a hang-up of ours, or a failure waitAll reports
	}
	tc.res.statuses[fa.ans.status]++
	switch fa.ans.status {
	case fasthttp.StatusTooManyRequests, fasthttp.StatusServiceUnavailable, fasthttp.StatusBadRequest:
		f.cred.charged-- // refused: nothing was counted
	case fasthttp.StatusGatewayTimeout:
		ir.got504 = true
	}
}

// originLogins reads how many logins the origin has in flight now.
func (ir *inflightRun) originLogins() (int64, error) {
	rep, err := ir.a.origin.inflight(ir.a.ctx)
	if err != nil {
		return 0, err
	}
	ir.atNow = rep.ByPath[inflightPath]
	return ir.atNow, nil
}

// settle waits until every login of fs either was answered without
// reaching the origin or is at the origin: the origin's logins in flight
// beyond base plus the answers that are not 504 (a 504's login is still
// held there) cover fs.
func (ir *inflightRun) settle(fs []*flight, base int64, guard time.Duration) error {
	deadline := time.Now().Add(guard)
	for {
		ir.collect(fs)
		at, err := ir.originLogins()
		if err != nil {
			return err
		}
		var away int64
		for _, f := range fs {
			if f.ans != nil && (f.ans.err != nil || f.ans.ans.status != fasthttp.StatusGatewayTimeout) {
				away++
			}
		}
		if at-base+away >= int64(len(fs)) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: after %v, of %d logins %d were answered and the origin had %d (%d before): a login neither refused nor at the origin", ir.tc.res.name, guard, len(fs), away, at, base)
		}
		if err := ir.pause(); err != nil {
			return err
		}
	}
}

// waitAll waits for every answer of fs. A connection error is the case's
// own hang-up in a hang-up case, and a run error otherwise.
func (ir *inflightRun) waitAll(fs []*flight, guard time.Duration) error {
	t := time.NewTimer(guard)
	defer t.Stop()
	for _, f := range fs {
		if f.ans == nil {
			select {
			case fa := <-f.done:
				ir.record(f, fa)
			case <-t.C:
				return fmt.Errorf("%s: a login had no answer after %v", ir.tc.res.name, guard)
			}
		}
		if err := f.ans.err; err != nil && !ir.spec.hangUp {
			return err
		}
	}
	return nil
}

// waitOriginIdle waits until the origin has no login in flight.
func (ir *inflightRun) waitOriginIdle(guard time.Duration) error {
	deadline := time.Now().Add(guard)
	for {
		at, err := ir.originLogins()
		if err != nil {
			return err
		}
		if at == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: the origin still had %d logins in flight %v after releasing them", ir.tc.res.name, at, guard)
		}
		if err := ir.pause(); err != nil {
			return err
		}
	}
}

// pause waits one poll interval.
func (ir *inflightRun) pause() error {
	t := time.NewTimer(inflightPoll)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ir.a.ctx.Done():
		return ir.a.ctx.Err()
	}
}

// freshWave sends limit logins, and sends again each one refused, in
// rounds, until limit are at the origin at once or guard has passed; it
// returns every login sent and the slots that did not come back.
func (ir *inflightRun) freshWave(guard time.Duration) ([]*flight, int64, error) {
	deadline := time.Now().Add(guard)
	var all []*flight
	var at int64
	for rounds := int64(0); ; rounds++ {
		want := int(ir.limit - at)
		if want <= 0 {
			return all, 0, nil
		}
		if time.Now().After(deadline) || rounds >= inflightRounds(ir.lease) {
			return all, int64(want), nil
		}
		fs, err := ir.launch(want)
		if err != nil {
			return nil, 0, err
		}
		all = append(all, fs...)
		if len(fs) == 0 {
			return all, -1, nil // ir.spent: the caller skips the check
		}
		if err := ir.settle(fs, at, inflightGuard); err != nil {
			return nil, 0, err
		}
		if at, err = ir.originLogins(); err != nil {
			return nil, 0, err
		}
		if at < ir.limit {
			if err := ir.pause(); err != nil {
				return nil, 0, err
			}
		}
	}
}

// answerWord says what a login got: "429", or "to the origin".
func (ir *inflightRun) answerWord(f *flight) string {
	if f.ans == nil {
		return "to the origin"
	}
	if f.ans.err != nil {
		return "no answer"
	}
	return fmt.Sprint(f.ans.ans.status)
}

// bound is the most of the case's logins the policy lets be at the origin
// at once: over every concurrency role that holds them, the logins it does
// not hold plus, per key, min(logins on it, limit), the least of these.
// A slot the edge gave up on comes back when its lease ends while the
// origin may still hold its login, so a held phase of span (its start to
// the release) longer than the lease lets limit more in per lease.
func (ir *inflightRun) bound(span time.Duration) caseBoundResult {
	span += 2 * clockAllowance
	type keyAgg struct {
		count int64
		op    constraint
	}
	type roleAgg struct {
		name    string
		matched int64
		keys    map[rules.Key]*keyAgg
	}
	var n int64
	roles := map[int]*roleAgg{}
	var order []int
	for _, v := range ir.verdicts {
		if v.refused {
			continue
		}
		n++
		for _, c := range v.inflight {
			ra := roles[c.role]
			if ra == nil {
				ra = &roleAgg{name: c.name, keys: map[rules.Key]*keyAgg{}}
				roles[c.role] = ra
				order = append(order, c.role)
			}
			ra.matched++
			ka := ra.keys[c.key]
			if ka == nil {
				ka = &keyAgg{op: c}
				ra.keys[c.key] = ka
			}
			ka.count++
		}
	}
	best := caseBoundResult{bound: n, why: "every one may be at the origin at once: no concurrency rule holds them"}
	slices.Sort(order)
	for _, role := range order {
		ra := roles[role]
		b := n - ra.matched
		var lim int64
		var lease time.Duration
		for _, ka := range ra.keys {
			lim, lease = ka.op.op.Limit, time.Duration(ka.op.op.PeriodUS)*time.Microsecond
			gens := int64(1)
			if lease > 0 {
				gens += int64(span / lease)
			}
			b += min(ka.count, lim*gens)
		}
		if b < best.bound {
			best.bound = b
			var w strings.Builder
			fmt.Fprintf(&w, "%s: concurrency %d in flight per key, lease %v, %d %s", ra.name, lim, lease, len(ra.keys), plural(len(ra.keys), "key", "keys"))
			if lease > 0 && span >= lease {
				fmt.Fprintf(&w, ", held %v: %d leases' worth", span.Round(time.Millisecond), 1+int64(span/lease))
			}
			if ra.matched < n {
				fmt.Fprintf(&w, ", and %d requests it does not hold", n-ra.matched)
			}
			best.why = w.String()
		}
	}
	return best
}

// post sends a control request to the origin and checks it answered 200.
func (o *originView) post(ctx context.Context, path, method string) error {
	r := &rawRequest{method: method, target: path}
	r.add("Host", o.c.addr)
	a, err := o.c.do(ctx, r)
	if err != nil {
		return fmt.Errorf("the origin's %s %s: %w", method, path, err)
	}
	if a.status != fasthttp.StatusOK {
		return fmt.Errorf("the origin's %s %s answered %d: is -origin the demo origin, with its hold controls (demo/hold.go)?", method, path, a.status)
	}
	return nil
}

// inflight reads the origin's GET /__origin/inflight.
func (o *originView) inflight(ctx context.Context) (demo.InFlightReport, error) {
	status, body, err := o.get(ctx, "/__origin/inflight")
	if err != nil {
		return demo.InFlightReport{}, err
	}
	if status != fasthttp.StatusOK {
		return demo.InFlightReport{}, fmt.Errorf("GET /__origin/inflight answered %d: is -origin the demo origin, with its hold controls (demo/hold.go)?", status)
	}
	var rep demo.InFlightReport
	if err := json.Unmarshal(body, &rep); err != nil {
		return demo.InFlightReport{}, fmt.Errorf("reading the origin's in-flight report: %w", err)
	}
	return rep, nil
}
