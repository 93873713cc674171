package nat

import (
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/edge-gateway/edge/gateway/ext"
	"github.com/edge-gateway/edge/rules"
)

// Extension returns the visitor feature's HTTP half (package gateway/ext),
// for a policy with a visitor block: it verifies the request's cookie
// before the decision (SetVisitor), tells the origin who the visitor is
// (X-Edge-Visitor: the ID's keyed hash, never the cookie), mints a new ID
// for a request without a valid cookie that its mint budget allows (the
// reserve's take in Settle's call, mint.go) and sets its cookie on the
// answer, counts what it minted (edge_visitor_ids_minted_total), and reads
// a visitor cookie an operator forgives.
//
// secret signs the cookies when the visitor block's secret_env is unset
// (cmd/edge hands its random one to the process that replaces it on a
// binary upgrade, so that the cookies it signed keep verifying); nil: a
// random one, made the first time it is needed and kept across reloads.
// Either way the node warns once: its cookies verify only on this node
// (docs/deploying.md).
func Extension(secret []byte) ext.Extension { return &extension{secret: secret} }

type extension struct {
	once   sync.Once
	secret []byte
}

func (*extension) Name() string { return "nat" }

func (*extension) Counters() []ext.Metric {
	return []ext.Metric{{Name: "edge_visitor_ids_minted_total",
		Help: "Visitor IDs minted for requests without a valid visitor cookie, within their IP's mint budget."}}
}

func (e *extension) Open(p *rules.Policy, env *ext.Env) (ext.Instance, error) {
	c := ConfigOf(p)
	if c == nil {
		return nil, nil
	}
	signer, err := e.signer(c, env.Log)
	if err != nil {
		return nil, err
	}
	return &instance{c: c, signer: signer, minted: env.Counters[0]}, nil
}

// signer signs and verifies visitor cookies with the secrets of the
// visitor block's secret_env: comma-separated, the first signs, all verify.
// Unset, the extension's secret signs (Extension).
func (e *extension) signer(c *Config, log *slog.Logger) (*Signer, error) {
	var secrets [][]byte
	if env := os.Getenv(c.SecretEnv); env != "" {
		var err error
		if secrets, err = ParseSecrets(env); err != nil {
			return nil, fmt.Errorf("visitor secrets in $%s: %w", c.SecretEnv, err)
		}
	} else {
		e.once.Do(func() {
			if e.secret == nil {
				e.secret = RandomSecret()
			}
			log.Warn("visitor secret not set: using a random one; visitor cookies will not verify on other nodes or after a restart, and a fleet needs a shared secret", "env", c.SecretEnv)
		})
		secrets = [][]byte{e.secret}
	}
	return NewSigner(Options{Secrets: secrets, MaxAge: c.MaxAge, Cookie: c.Cookie, Insecure: !c.Secure})
}

// instance is the extension's part in serving a policy with a visitor
// block. What it keeps per request is in the visitor's memo slot
// (visitorState).
type instance struct {
	c      *Config
	signer *Signer
	minted ext.Counter
}

// hdrXEdgeVisitor is X-Edge-Visitor in fasthttp's canonical form (what
// SetBytesV would normalise it to), so that SetCanonical sets it without
// normalising a constant per request.
var hdrXEdgeVisitor = []byte("X-Edge-Visitor")

// BeforeDecide verifies the request's visitor cookie (SetVisitor).
func (in *instance) BeforeDecide(r *ext.Request) {
	id, valid := in.signer.Verify(r.Ctx.Request.Header.Cookie(in.c.Cookie), r.Now)
	in.c.SetVisitor(r.Scratch, id, valid)
}

// OnForward tells the origin who the visitor is, X-Edge-Visitor, and
// notes where a request without a valid cookie may get a new ID from
// (MintFrom). From the bulk budget, the ID is the request's now: its
// cookie value is kept for the answer (OnResponse), and the origin learns
// it. From the reserve, the ID exists only once the reserve's take after
// the origin's answer allows it (mint.go): the origin learns it from the
// client's next request.
func (in *instance) OnForward(r *ext.Request, req *fasthttp.Request) {
	st := stateOf(r.Scratch.Memo(in.c.slot))
	st.forward, st.reserve = NoMint, false
	id, ok := in.c.Visitor(r.Scratch)
	if !ok {
		st.forward = in.c.MintFrom(r.Scratch, r.Decision)
	}
	if st.forward == MintBulk {
		st.cookie, id = in.signer.Mint(st.cookie[:0], r.Now)
		in.minted.Inc()
		ok = true
	}
	if ok {
		r.Buf = in.signer.AppendVisitorHash(r.Buf[:0], id)
		req.Header.SetCanonical(hdrXEdgeVisitor, r.Buf)
	}
}

// OnOrigin asks for Settle's call when the request's ID is to come from
// the reserve and its answer may carry the cookie (not one a shared cache
// may store: the client stays in its IP's cookieless bucket and is offered
// a cookie on its next uncacheable answer): the reserve's take is in that
// call (DrawReserve), the one store call more such a request makes.
func (in *instance) OnOrigin(r *ext.Request, _ *fasthttp.Response) bool {
	st := stateOf(r.Scratch.Memo(in.c.slot))
	st.reserve = st.forward == MintReserve && !r.Storable && in.c.DrawReserve(r.Scratch)
	return st.reserve
}

// OnResponse sets the new ID's cookie on the answer: the bulk budget's,
// or the reserve's once its take allowed it (ReserveDrawn), never on an
// answer a shared cache may store.
func (in *instance) OnResponse(r *ext.Request, resp *fasthttp.Response) {
	st := stateOf(r.Scratch.Memo(in.c.slot))
	issued := st.forward == MintBulk
	if st.reserve && in.c.ReserveDrawn(r.Scratch) {
		st.cookie, _ = in.signer.Mint(st.cookie[:0], r.Now) // the reserve's ID, issued now
		in.minted.Inc()
		issued = true
	}
	if issued && !r.Storable {
		r.Buf = in.signer.AppendSetCookie(r.Buf[:0], st.cookie)
		resp.Header.AddBytesV(fasthttp.HeaderSetCookie, r.Buf)
	}
}

// OnDecideAllow does OnForward's and OnResponse's part on the
// decision-only listener's 200, for the proxy in front to copy: no call
// follows the origin's answer there, where the reserve is taken, so a new
// ID comes from the bulk budget only (mint.go).
func (in *instance) OnDecideAllow(r *ext.Request, h *fasthttp.ResponseHeader) {
	id, ok := in.c.Visitor(r.Scratch)
	if !ok && in.c.MintFrom(r.Scratch, r.Decision) == MintBulk {
		st := stateOf(r.Scratch.Memo(in.c.slot))
		st.cookie, id = in.signer.Mint(st.cookie[:0], r.Now)
		in.minted.Inc()
		r.Buf = in.signer.AppendSetCookie(r.Buf[:0], st.cookie)
		h.AddBytesV(fasthttp.HeaderSetCookie, r.Buf)
		ok = true
	}
	if ok {
		r.Buf = in.signer.AppendVisitorHash(r.Buf[:0], id)
		h.SetBytesV("X-Edge-Visitor", r.Buf)
	}
}

// visitorIP names, in POST /admin/forgive, the address a visitor cookie
// was at: not itself an identity to forgive.
const visitorIP = "visitor_ip"

func (*extension) ForgiveNames() (string, []string) { return "visitor", []string{visitorIP} }

// ForgiveText turns a visitor cookie's value into the visitor
// characteristic's text form ("ID@ADDRESS", visitorChar.AppendText),
// verifying the cookie as a request's is; the address is
// given["visitor_ip"], or else given["ip"].
func (*extension) ForgiveText(inst ext.Instance, value string, given map[string]string, now time.Time) (string, error) {
	addr := given[visitorIP]
	if addr == "" {
		addr = given["ip"]
	}
	in, _ := inst.(*instance)
	switch {
	case in == nil:
		return "", errors.New("the running policy has no visitor block: there are no visitors to forgive")
	case addr == "":
		return "", errors.New(`a visitor counts at its address: give "visitor_ip" (or "ip", which forgives the address's rules too)`)
	}
	id, valid := in.signer.Verify([]byte(strings.TrimSpace(value)), now)
	if !valid {
		return "", errors.New("the visitor cookie does not verify (tampered, expired, or signed by a secret this node does not hold)")
	}
	return hex.EncodeToString(id[:]) + "@" + strings.TrimSpace(addr), nil
}

var (
	_ ext.Counted        = (*extension)(nil)
	_ ext.Forgiver       = (*extension)(nil)
	_ ext.Decider        = (*instance)(nil)
	_ ext.Forwarder      = (*instance)(nil)
	_ ext.Settler        = (*instance)(nil)
	_ ext.Responder      = (*instance)(nil)
	_ ext.DecideAnswerer = (*instance)(nil)
)
