package demo

import (
	"crypto/rand"
	"crypto/subtle"
	"fmt"
	"math/big"
	"strings"
	"time"

	"github.com/valyala/fasthttp"
)

// challenge is one pending OTP challenge.
type challenge struct {
	id      string
	phone   string // digits only, see phoneDigits
	code    string
	expires time.Time
}

// otpSend opens a challenge for the phone and, being a demo, tells its code.
func (o *Origin) otpSend(ctx *fasthttp.RequestCtx) {
	f, err := readFields(ctx)
	if err != nil {
		writeJSON(ctx, fasthttp.StatusBadRequest, `{"error":"malformed body"}`)
		return
	}
	phone := phoneDigits(f["phone"])
	if phone == "" {
		writeJSON(ctx, fasthttp.StatusBadRequest, `{"error":"missing phone"}`)
		return
	}
	c := &challenge{
		id:      rand.Text(),
		phone:   phone,
		code:    randomCode(),
		expires: o.now().Add(challengeTTL),
	}
	o.addChallenge(c)
	writeJSONValue(ctx, fasthttp.StatusOK, struct {
		ChallengeID string `json:"challenge_id"`
		DemoCode    string `json:"demo_code"`
	}{c.id, c.code})
}

// otpVerify consumes a matching, unexpired challenge. A wrong code leaves
// the challenge in place: limiting guesses is the edge's job.
func (o *Origin) otpVerify(ctx *fasthttp.RequestCtx) {
	f, err := readFields(ctx)
	if err != nil {
		writeJSON(ctx, fasthttp.StatusBadRequest, `{"error":"malformed body"}`)
		return
	}
	if !o.verifyChallenge(f["challenge_id"], phoneDigits(f["phone"]), f["code"]) {
		writeJSON(ctx, fasthttp.StatusUnauthorized, `{"error":"invalid code"}`)
		return
	}
	writeJSON(ctx, fasthttp.StatusOK, `{"ok":true}`)
}

// addChallenge stores c, dropping expired challenges and, when full, the
// oldest ones. Challenges share one TTL, so oldest first is expiry order.
func (o *Origin) addChallenge(c *challenge) {
	now := o.now()
	o.otpMu.Lock()
	defer o.otpMu.Unlock()
	for e := o.order.Front(); e != nil; e = o.order.Front() {
		old := e.Value.(*challenge)
		if len(o.challenges) < o.maxChallenges && now.Before(old.expires) {
			break
		}
		o.order.Remove(e)
		delete(o.challenges, old.id)
	}
	o.challenges[c.id] = o.order.PushBack(c)
}

// verifyChallenge reports whether id names an unexpired challenge for phone
// with code, and consumes it if so.
func (o *Origin) verifyChallenge(id, phone, code string) bool {
	now := o.now()
	o.otpMu.Lock()
	defer o.otpMu.Unlock()
	e, ok := o.challenges[id]
	if !ok {
		return false
	}
	c := e.Value.(*challenge)
	if !now.Before(c.expires) {
		o.order.Remove(e)
		delete(o.challenges, id)
		return false
	}
	if phone != c.phone || subtle.ConstantTimeCompare([]byte(code), []byte(c.code)) != 1 {
		return false
	}
	o.order.Remove(e)
	delete(o.challenges, id)
	return true
}

// phoneDigits keeps the digits of a phone number, so "+1 (202) 555-0143"
// and "+12025550143" name the same phone. Full E.164 normalisation is the
// edge's business (otp/); the origin only needs send and verify to agree.
func phoneDigits(s string) string {
	var b strings.Builder
	for _, r := range s {
		if r >= '0' && r <= '9' {
			b.WriteRune(r)
		}
	}
	return b.String()
}

// randomCode returns a uniformly random 6-digit code.
func randomCode() string {
	n, err := rand.Int(rand.Reader, big.NewInt(1_000_000))
	if err != nil {
		// crypto/rand never fails on supported platforms (Go 1.24+).
		panic(fmt.Sprintf("reading random code: %v", err))
	}
	return fmt.Sprintf("%06d", n.Int64())
}
