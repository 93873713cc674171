package main

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"strings"
	"time"

	"github.com/edge-gateway/edge/otp"
	"github.com/valyala/fasthttp"
)

// The otp-pumping scenario (issue 5): SMS pumping, as a fraudster paid per
// text delivered does it. Phase A walks through one numbering block, every
// number once, each from its own client address and without a cookie, so
// that only a limit per block (otp-send-per-range) can stop it; phase B
// sends to numbers of countries outside the allow list, which the country
// rule (otp-send-countries) must deny outright. What reached the origin
// is read from the demo origin's hit counts and compared with the bounds:
// -range-limit for the block, 0 for the foreign numbers.

// pumpingCountries are the regions phase B sends to first, one example
// mobile number each, in this order: countries named in SMS pumping
// reports, all outside the allow list. Further numbers (-foreign-numbers
// above their count) come from the other regions, in the fixture's order.
var pumpingCountries = []string{
	"RU", "NG", "PK", "UZ", "KZ", "TJ", "KG", "AZ", "BD", "ID", "VN", "EG",
	"IR", "IQ", "LK", "MM", "NP", "PH", "TH", "UA", "BY", "SN", "GH", "KE",
	"CM", "CI", "ET", "TZ", "UG", "ZW", "AF", "SY", "YE", "LB", "DZ", "MA",
}

// otpForeignNumber is one number outside the allow list.
type otpForeignNumber struct {
	region string // as the edge's normaliser reads it
	e164   string
}

// loadForeignNumbers reads n numbers from the libphonenumber example
// numbers at path: rows of type mobile, valid, whose region is not on the
// allow list, and which the edge's own normaliser (package otp) also puts
// outside it; one per region, pumpingCountries first.
func loadForeignNumbers(path string, n int) ([]otpForeignNumber, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("reading phone numbers: %w", err)
	}
	defer f.Close()
	return readForeignNumbers(f, path, n)
}

func readForeignNumbers(r io.Reader, name string, n int) ([]otpForeignNumber, error) {
	cr := csv.NewReader(r)
	header, err := cr.Read()
	if err != nil {
		return nil, fmt.Errorf("reading phone numbers %s: %w", name, err)
	}
	col := make(map[string]int, len(header))
	for i, h := range header {
		col[strings.TrimSpace(h)] = i
	}
	for _, c := range []string{"region", "type", "e164", "valid"} {
		if _, ok := col[c]; !ok {
			return nil, fmt.Errorf("reading phone numbers %s: no %q column", name, c)
		}
	}
	byRegion := make(map[string]otpForeignNumber)
	var order []string // regions in the fixture's order
	for {
		row, err := cr.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("reading phone numbers %s: %w", name, err)
		}
		if row[col["type"]] != "mobile" || row[col["valid"]] != "true" || otpAllowed(row[col["region"]]) {
			continue
		}
		p, err := otp.Normalize(row[col["e164"]], "")
		if err != nil || otpAllowed(p.Country()) {
			continue
		}
		if _, dup := byRegion[p.Country()]; dup {
			continue
		}
		byRegion[p.Country()] = otpForeignNumber{region: p.Country(), e164: p.E164}
		order = append(order, p.Country())
	}
	out := make([]otpForeignNumber, 0, n)
	taken := make(map[string]bool)
	for _, list := range [][]string{pumpingCountries, order} {
		for _, region := range list {
			if fn, ok := byRegion[region]; ok && !taken[region] && len(out) < n {
				taken[region] = true
				out = append(out, fn)
			}
		}
	}
	if len(out) < n {
		return nil, fmt.Errorf("phone numbers %s: -foreign-numbers %d, but only %d regions outside %s have a valid mobile example",
			name, n, len(out), strings.Join(otpAllowedCountries, ", "))
	}
	return out, nil
}

// pumpingResult is what an otp-pumping run saw.
type pumpingResult struct {
	target, origin string
	elapsed        time.Duration

	block        otpBlock
	blockClient  string // the first client address of phase A
	blockSends   otpTally
	blockBound   otpBound
	foreign      []otpForeignNumber
	foreignSends otpTally
	foreignBound otpBound
}

// failures lists the bounds exceeded.
func (r *pumpingResult) failures() []string { return otpFailures(r.blockBound, r.foreignBound) }

// writePumpingReport writes the run's report.
func writePumpingReport(w io.Writer, r *pumpingResult) error {
	var b strings.Builder
	fmt.Fprintf(&b, "otp-pumping: POST %s through %s, counted at the origin %s, in %s\n\n",
		otpSendPath, r.target, r.origin, r.elapsed.Round(time.Millisecond))

	first, last := "", ""
	if n := len(r.block.phones); n > 0 {
		first, last = r.block.phones[0], r.block.phones[n-1]
	}
	fmt.Fprintf(&b, "phase A, one numbering block: %s … %s (phone_range %s)\n", first, last, r.block.rng)
	fmt.Fprintf(&b, "  %d numbers, each once, each from its own client address (%s on), no cookie\n", len(r.block.phones), r.blockClient)
	writeOTPCount(&b, "  ", r.blockSends, r.blockBound)

	regions := make([]string, len(r.foreign))
	for i, fn := range r.foreign {
		regions[i] = fn.region
	}
	fmt.Fprintf(&b, "\nphase B, countries outside %s: %d numbers, one mobile example per country, each from its own client address\n",
		strings.Join(otpAllowedCountries, ", "), len(r.foreign))
	fmt.Fprintf(&b, "  %s\n", strings.Join(regions, " "))
	writeOTPCount(&b, "  ", r.foreignSends, r.foreignBound)

	if f := r.failures(); len(f) > 0 {
		fmt.Fprintf(&b, "\notp-pumping: FAIL: %s\n", strings.Join(f, "; "))
	} else {
		fmt.Fprintf(&b, "\notp-pumping: ok: %d of %d block sends and %d of %d foreign sends reached the origin, within their bounds (%d and %d)\n",
			r.blockBound.reached, r.blockBound.attempted, r.foreignBound.reached, r.foreignBound.attempted, r.blockBound.bound, r.foreignBound.bound)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// runOTPPumping runs otp-pumping.
func runOTPPumping(ctx context.Context, cfg config) error {
	p := cfg.otp
	foreign, err := loadForeignNumbers(p.phones, p.foreign)
	if err != nil {
		return err
	}
	// A block in a random area code, so counters an earlier run left on
	// its range (an hour, in otp.hcl) most likely do not count; or in
	// -area-code's, for a run that must not meet an earlier one's.
	var block otpBlock
	if p.areaCode != 0 {
		b, ok := otpBlockFor(p.areaCode)
		if !ok {
			return fmt.Errorf("-area-code %d: its 555-0100..0199 numbers are not one range in an allowed country", p.areaCode)
		}
		block = b
	} else if block, err = pickOTPBlock(rand.IntN); err != nil {
		return err
	}
	if need := len(block.phones) + len(foreign); need > cfg.requests {
		return fmt.Errorf("the scenario needs %d requests (%d block sends, %d foreign sends), over -requests %d",
			need, len(block.phones), len(foreign), cfg.requests)
	}
	run, err := startOTPRun(ctx, cfg, p.origin)
	if err != nil {
		return err
	}
	defer run.close()
	origin, edge, before, start, addrs := run.origin, run.edge, run.before, run.start, run.addrs
	res := &pumpingResult{
		target:  cfg.target.base,
		origin:  p.origin.base,
		block:   block,
		foreign: foreign,
	}

	send := func(phone string, t *otpTally) error {
		status, body, err := edge.do(ctx, fasthttp.MethodPost, otpSendPath, map[string]string{"phone": phone}, addrs.take())
		if err != nil {
			return err
		}
		id, _ := otpChallenge(status, body)
		t.add(status, id != "")
		return nil
	}

	res.blockClient = addrs.peek()
	for _, phone := range block.phones {
		if err := send(phone, &res.blockSends); err != nil {
			return err
		}
	}
	mid, err := origin.hits(ctx)
	if err != nil {
		return err
	}
	for _, fn := range foreign {
		if err := send(fn.e164, &res.foreignSends); err != nil {
			return err
		}
	}
	after, err := origin.hits(ctx)
	if err != nil {
		return err
	}
	res.elapsed = time.Since(start)

	if res.blockBound, err = otpOriginBound(before, mid, otpSendPath, res.blockSends, "block sends", p.rangeLimit, "-range-limit"); err != nil {
		return err
	}
	if res.foreignBound, err = otpOriginBound(mid, after, otpSendPath, res.foreignSends, "foreign sends", 0, "the country allow list"); err != nil {
		return err
	}

	if err := writePumpingReport(cfg.stdout, res); err != nil {
		return fmt.Errorf("writing report: %w", err)
	}
	if f := res.failures(); len(f) > 0 {
		return fmt.Errorf("%w: %s", errMismatch, strings.Join(f, "; "))
	}
	return nil
}

// otpChallenge returns the challenge ID and the code of a send the origin
// answered (the demo origin tells its code); "" when the answer is not one.
func otpChallenge(status int, body []byte) (id, code string) {
	if status != fasthttp.StatusOK {
		return "", ""
	}
	var c struct {
		ID   string `json:"challenge_id"`
		Code string `json:"demo_code"`
	}
	if json.Unmarshal(body, &c) != nil {
		return "", ""
	}
	return c.ID, c.Code
}
