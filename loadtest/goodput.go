package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/netip"
	"strings"
	"sync"
	"time"

	"github.com/valyala/fasthttp"
)

// The goodput scenario (issue 27, goal 3): what the people a node protects
// get while a flood is on. Two open loops run at once against one target:
//
//   - the flood: POST /login with a wrong password for one of a million
//     accounts, from -clients addresses taken in turn from 198.18.0.0/15,
//     at -rate requests a second over the -connections pool;
//   - the users: -users people, user u at 192.0.2.(u+1) with its own
//     account (user<u>@example.com, the demo origin's password) and phone
//     (mixPhone(u)), logging in and sending an OTP by turns, at
//     -user-rate requests a second in all over -user-connections
//     connections of their own.
//
// Both loops measure latency from each request's due time, in HDR
// histograms, so a node that queues the users behind the flood shows it
// (coordinated omission). A user's request counts as served only when it
// got a 2xx; one refused, failed, timed out or never sent (missed) counts
// against the success share. The per-IP rule that should refuse the
// flood and serve the users is the target's: bench/goodput.hcl for the
// edge, bench/goodput-nginx.conf for NGINX limit_req (bench/run.sh
// -goodput).

// Bounds of the goodput flags.
const (
	maxGoodputUsers = 254 // 192.0.2.1 … 192.0.2.254 (RFC 5737's TEST-NET-1)
	maxUserRate     = 10_000
)

// goodputParams are the goodput scenario's own flags; the flood's rate,
// pool and addresses are -rate, -connections and -clients.
type goodputParams struct {
	users     int     // -users: legitimate users, one address, account and phone each
	userRate  float64 // -user-rate: the users' requests a second, in all
	userConns int     // -user-connections: the users' connection pool
}

var defaultGoodputParams = goodputParams{users: 50, userRate: 25, userConns: 50}

// register defines the flags on fs, writing into p.
func (p *goodputParams) register(fs *flag.FlagSet) {
	fs.IntVar(&p.users, "users", p.users, fmt.Sprintf("goodput: legitimate users, user u at 192.0.2.(u+1) with its own account and phone (at most %d)", maxGoodputUsers))
	fs.Float64Var(&p.userRate, "user-rate", p.userRate, fmt.Sprintf("goodput: the users' requests a second in all, logins and OTP sends by turns, an open loop (at most %d)", maxUserRate))
	fs.IntVar(&p.userConns, "user-connections", p.userConns, "goodput: the users' pool of connections, apart from the flood's (at most 512)")
}

// check reports a flag out of range.
func (p *goodputParams) check() error {
	switch {
	case p.users < 1 || p.users > maxGoodputUsers:
		return fmt.Errorf("-users must be in [1, %d], got %d", maxGoodputUsers, p.users)
	case !(p.userRate > 0 && p.userRate <= maxUserRate):
		return fmt.Errorf("-user-rate must be in (0, %d], got %v", maxUserRate, p.userRate)
	case p.userConns < 1 || p.userConns > maxConnections:
		return fmt.Errorf("-user-connections must be in [1, %d], got %d", maxConnections, p.userConns)
	}
	return nil
}

// goodputUser returns user u's address, account and phone.
func goodputUser(u int) (addr, account, phone string) {
	return netip.AddrFrom4([4]byte{192, 0, 2, byte(u + 1)}).String(), fmt.Sprintf("user%d@example.com", u), mixPhone(u)
}

// goodputBuilds returns the request builders of the flood and of the
// users: request n of the flood is from address n mod -clients; request n
// of the users is user n mod -users's, a login when n ÷ -users is even and
// an OTP send when it is odd.
func goodputBuilds(cfg config) (flood, users func(int64, *fasthttp.Request)) {
	addrs := clientAddrStrings(cfg.clients)
	login := cfg.target.base + "/login"
	flood = func(n int64, req *fasthttp.Request) {
		if n < 0 {
			req.SetRequestURI(login)
			req.Header.SetMethod(fasthttp.MethodPost)
			req.Header.SetContentType("application/json")
			return
		}
		req.Header.Set("X-Forwarded-For", addrs[n%int64(len(addrs))])
		h := splitmix64(uint64(n))
		req.ResetBody()
		fmt.Fprintf(req.BodyWriter(), `{"username":"victim%d@example.com","password":"guess-%d"}`, h%1_000_000, h>>40)
	}
	type user struct{ addr, login, otp string }
	us := make([]user, cfg.goodput.users)
	for u := range us {
		addr, account, phone := goodputUser(u)
		us[u] = user{addr, fmt.Sprintf(`{"username":%q,"password":%q}`, account, mixPassword), fmt.Sprintf(`{"phone":%q}`, phone)}
	}
	otp := cfg.target.base + "/otp/send"
	users = func(n int64, req *fasthttp.Request) {
		if n < 0 {
			req.Header.SetMethod(fasthttp.MethodPost)
			req.Header.SetContentType("application/json")
			n = 0 // the opening request: user 0's login
		}
		u := &us[n%int64(len(us))]
		req.Header.Set("X-Forwarded-For", u.addr)
		if n/int64(len(us))%2 == 0 {
			req.SetRequestURI(login)
			req.SetBodyString(u.login)
		} else {
			req.SetRequestURI(otp)
			req.SetBodyString(u.otp)
		}
	}
	return flood, users
}

// goodputResult is one goodput run: the flood's loop and the users'.
type goodputResult struct {
	flood, users          *genResult
	floodDials, userDials int64
	floodErr, usersErr    error
}

// success is the share of the users' due requests that got a 2xx.
func (r *goodputResult) success() float64 {
	due := r.users.answered() + r.users.failed() + r.users.missed
	if due == 0 {
		return 0
	}
	return float64(r.users.count2xx()) / float64(due)
}

// runGoodput is the goodput scenario.
func runGoodput(ctx context.Context, cfg config) error {
	if cfg.gen.rate <= 0 {
		return fmt.Errorf("goodput needs -rate, the flood's requests a second (an open loop)")
	}
	flood, users := goodputBuilds(cfg)
	ucfg := cfg
	ucfg.connections = cfg.goodput.userConns
	ucfg.gen.rate = cfg.goodput.userRate
	var r goodputResult
	var wg sync.WaitGroup
	wg.Go(func() { r.flood, r.floodDials, r.floodErr = runGen(ctx, cfg, genSpecOf(cfg, 1, nil), flood) })
	wg.Go(func() { r.users, r.userDials, r.usersErr = runGen(ctx, ucfg, genSpecOf(ucfg, 1, nil), users) })
	wg.Wait()
	if r.floodErr != nil {
		return fmt.Errorf("the flood: %w", r.floodErr)
	}
	if r.usersErr != nil {
		return fmt.Errorf("the users: %w", r.usersErr)
	}
	var b strings.Builder
	writeGoodput(&b, cfg, &r)
	if _, err := io.WriteString(cfg.stdout, b.String()); err != nil {
		return fmt.Errorf("writing report: %w", err)
	}
	return nil
}

// writeGoodput appends the report of r: each loop as plain reports it,
// then the users' success share and the result line.
func writeGoodput(b *strings.Builder, cfg config, r *goodputResult) {
	fcfg := cfg
	fcfg.gen.apiKeys = 0 // the flood sends none
	fh := genHeader{scenario: "goodput flood", what: "POST /login, wrong passwords for a million accounts", cfg: fcfg}
	fh.write(b, r.flood, r.floodDials)
	ucfg := cfg
	ucfg.connections, ucfg.clients, ucfg.gen.rate, ucfg.gen.apiKeys = cfg.goodput.userConns, cfg.goodput.users, cfg.goodput.userRate, 0
	b.WriteString("\n")
	uh := genHeader{scenario: "goodput users", what: "POST /login and POST /otp/send by turns, each user its own account and phone", cfg: ucfg}
	uh.write(b, r.users, r.userDials)
	due := r.users.answered() + r.users.failed() + r.users.missed
	fmt.Fprintf(b, "\nusers served: %d of %d due (%.2f%%): 2xx only; refused, failed, timed out and missed requests count against it\n",
		r.users.count2xx(), due, 100*r.success())
	f, u := r.flood, r.users
	fmt.Fprintf(b, "result: scenario=goodput flood_rate=%s flood_rps=%.1f flood_2xx=%d flood_429=%d flood_other=%d flood_errors=%d flood_missed=%d "+
		"users=%d user_rate=%s user_due=%d user_2xx=%d user_success=%.4f user_p50_ms=%s user_p99_ms=%s user_p999_ms=%s user_max_ms=%s\n",
		fmtRate(cfg.gen.rate), f.rate(), f.count2xx(), f.statuses[429], f.answered()-f.count2xx()-f.statuses[429], f.failed(), f.missed,
		cfg.goodput.users, fmtRate(cfg.goodput.userRate), due, u.count2xx(), r.success(),
		fmtMS(u.hist.ValueAtQuantile(50)), fmtMS(u.hist.ValueAtQuantile(99)), fmtMS(u.hist.ValueAtQuantile(99.9)), fmtMS(u.hist.Max()))
}

// goodputBudget is the run's deadline: genBudget's, the users' loop being
// open too.
func goodputBudget(cfg config) time.Duration {
	cfg.gen.rate = max(cfg.gen.rate, 1)
	return genBudget(cfg)
}
