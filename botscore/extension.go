package botscore

import (
	"github.com/valyala/fasthttp"

	"github.com/edge-gateway/edge/gateway/ext"
	"github.com/edge-gateway/edge/rules"
)

// Extension returns the bot score's HTTP half (package gateway/ext): for a
// policy with a botscore block, the origin learns each request's score
// and why (issue 12), in X-Edge-Bot-Score and X-Edge-Bot-Reasons (the
// client's copies of X-Edge-* are stripped before), the decision-only
// listener's 200 carries them for the proxy in front, and POST
// /admin/explain's answer has them as bot_score and bot_reasons.
func Extension() ext.Extension { return extension{} }

type extension struct{}

func (extension) Name() string { return "botscore" }

func (extension) Open(p *rules.Policy, _ *ext.Env) (ext.Instance, error) {
	if c := ConfigOf(p); c != nil {
		return instance{c}, nil
	}
	return nil, nil
}

// instance is the extension's part in serving a policy with a botscore
// block.
type instance struct{ c *Config }

// The headers' names in fasthttp's canonical form (what SetBytesV would
// normalise them to), so that SetCanonical sets them without normalising
// a constant per request.
var (
	hdrXEdgeBotScore   = []byte("X-Edge-Bot-Score")
	hdrXEdgeBotReasons = []byte("X-Edge-Bot-Reasons")
)

// OnForward tells the origin the request's score and reasons.
func (in instance) OnForward(r *ext.Request, req *fasthttp.Request) {
	res := in.c.Result(r.Rules, r.Scratch)
	r.Buf = res.AppendScore(r.Buf[:0])
	req.Header.SetCanonical(hdrXEdgeBotScore, r.Buf)
	r.Buf = res.Reasons.AppendNames(r.Buf[:0])
	req.Header.SetCanonical(hdrXEdgeBotReasons, r.Buf)
}

// OnDecideAllow puts them on the decision-only listener's 200.
func (in instance) OnDecideAllow(r *ext.Request, h *fasthttp.ResponseHeader) {
	res := in.c.Result(r.Rules, r.Scratch)
	r.Buf = res.AppendScore(r.Buf[:0])
	h.SetBytesV("X-Edge-Bot-Score", r.Buf)
	r.Buf = res.Reasons.AppendNames(r.Buf[:0])
	h.SetBytesV("X-Edge-Bot-Reasons", r.Buf)
}

// Explain adds bot_score, and bot_reasons unless there are none, to the
// explain answer: the score the request would get, its reasons by name.
func (in instance) Explain(r *ext.Request, dst []ext.Field) []ext.Field {
	res := in.c.Result(r.Rules, r.Scratch)
	dst = append(dst, ext.Field{Name: "bot_score", Value: int(res.Score)})
	var names []string
	for _, x := range AllReasons() {
		if res.Reasons.Has(x) {
			names = append(names, x.Name())
		}
	}
	if len(names) > 0 {
		dst = append(dst, ext.Field{Name: "bot_reasons", Value: names})
	}
	return dst
}

var (
	_ ext.Forwarder      = instance{}
	_ ext.DecideAnswerer = instance{}
	_ ext.Explainer      = instance{}
)
