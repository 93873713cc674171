package demo

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/valyala/fasthttp"
)

var errMalformedBody = errors.New("malformed body")

// readFields returns the string fields of a JSON object body, or of a form
// (urlencoded or multipart) body. JSON numbers and booleans are kept in
// their JSON spelling, so {"code": 123456} works like {"code": "123456"}.
func readFields(ctx *fasthttp.RequestCtx) (map[string]string, error) {
	ct := ctx.Request.Header.ContentType()
	body := ctx.PostBody()
	switch {
	case bytes.Contains(ct, []byte("json")) ||
		(len(ct) == 0 && len(bytes.TrimSpace(body)) > 0 && bytes.TrimSpace(body)[0] == '{'):
		var raw map[string]json.RawMessage
		if err := json.Unmarshal(body, &raw); err != nil {
			return nil, errMalformedBody
		}
		f := make(map[string]string, len(raw))
		for k, v := range raw {
			var s string
			if err := json.Unmarshal(v, &s); err == nil {
				f[k] = s
				continue
			}
			if t := bytes.TrimSpace(v); len(t) > 0 && t[0] != '{' && t[0] != '[' && !bytes.Equal(t, []byte("null")) {
				f[k] = string(t)
			}
		}
		return f, nil
	case bytes.HasPrefix(ct, []byte("multipart/form-data")):
		form, err := ctx.MultipartForm()
		if err != nil {
			return nil, errMalformedBody
		}
		f := make(map[string]string, len(form.Value))
		for k, v := range form.Value {
			if len(v) > 0 {
				f[k] = v[0]
			}
		}
		return f, nil
	default:
		args := ctx.PostArgs()
		f := make(map[string]string, args.Len())
		for k, v := range args.All() {
			if _, dup := f[string(k)]; !dup {
				f[string(k)] = string(v)
			}
		}
		return f, nil
	}
}

// writeJSON answers with a literal JSON body.
func writeJSON(ctx *fasthttp.RequestCtx, status int, body string) {
	ctx.SetStatusCode(status)
	ctx.SetContentType("application/json")
	ctx.Response.Header.Set(fasthttp.HeaderCacheControl, "no-store")
	ctx.SetBodyString(body)
}

// writeJSONValue answers with v encoded as JSON.
func writeJSONValue(ctx *fasthttp.RequestCtx, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		// Only the package's own maps and structs get here.
		panic(fmt.Sprintf("encoding demo origin response: %v", err))
	}
	ctx.SetStatusCode(status)
	ctx.SetContentType("application/json")
	ctx.Response.Header.Set(fasthttp.HeaderCacheControl, "no-store")
	ctx.SetBody(b)
}
