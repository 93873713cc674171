package differential

import (
	"bytes"
	"compress/flate"
	"compress/gzip"
	"fmt"
	"math/rand/v2"
	"strings"
)

// corpusCase is one hostile request, written with a send's fresh values.
type corpusCase struct {
	// Name is unique, "CLASS/DETAIL".
	Name string
	// Class is the seam the case aims at (issue 9, item 1), by which
	// findings are grouped.
	Class string
	Build func(v vals) request
	// MustForward marks the plain requests every edge forwards (a JSON body
	// as application/json, a form as application/x-www-form-urlencoded):
	// an edge that refused them would agree with every origin by refusing
	// everything, and the harness fails instead.
	MustForward bool
}

// The seams, as the issue names them.
const (
	classBypass     = "known bypass"
	classType       = "content-type spelling"
	classCharset    = "content-type charset"
	classNoType     = "no content-type"
	classTwoTypes   = "two content-types"
	classOtherType  = "other content-type"
	classMultipart  = "multipart/form-data"
	classEncoding   = "content-encoding"
	classQueryBody  = "query and body"
	classQuery      = "query only"
	classDupJSON    = "json duplicate keys"
	classNested     = "nested or array values"
	classBOM        = "byte order mark"
	classNUL        = "nul"
	classOverlong   = "overlong or invalid utf-8"
	classMangling   = "php name mangling"
	classFormDup    = "form duplicate fields"
	classMethod     = "method"
	classFraming    = "framing"
	classJSONSyntax = "json syntax"
	classUTF16      = "utf-16 body"
	classFuzz       = "fuzz"
	formType        = "application/x-www-form-urlencoded"
	jsonType        = "application/json"
)

// Bodies naming every identity, each in one place.

// A login or signup names a username and an email that differ (issue 24):
// the plain bodies carry both, and the edge must count each.

func formBody(v vals) string {
	return "phone=" + q(v.Victim) + "&username=" + q(v.User) + "&email=" + q(v.Email) + "&challenge_id=" + q(v.Chal) + "&code=" + v.Code
}

func jsonBody(v vals) string {
	return `{"phone":"` + v.Victim + `","username":"` + v.User + `","email":"` + v.Email + `","challenge_id":"` + v.Chal + `","code":"` + v.Code + `"}`
}

// The two bypass bodies: JSON that names the decoys where a JSON
// parser looks, and the victims inside a string where a form parser looks.

// bypass1 is {"phone":"+12025550100","a":"&phone=%2B79161234567&b="} with
// the roles of the issue (the edge counted the JSON phone, the origin
// texted the form's): the victim is the form's.
func bypass1(v vals) string {
	return `{"phone":"` + v.Decoy + `","a":"&phone=` + q(v.Victim) + `&b="}`
}

// bypass2 is {"a":"&phone=VICTIM&b=","phone":"DECOY"}.
func bypass2(v vals) string {
	return `{"a":"&phone=` + q(v.Victim) + `&b=","phone":"` + v.Decoy + `"}`
}

// bypass1All and bypass2All do the same for every identity.
func bypass1All(v vals) string {
	return `{"phone":"` + v.Decoy + `","username":"` + v.UserDecoy + `","email":"` + v.EmailDecoy + `","challenge_id":"` + v.ChalDecoy +
		`","a":"&phone=` + q(v.Victim) + `&username=` + q(v.User) + `&email=` + q(v.Email) + `&challenge_id=` + q(v.Chal) + `&code=` + v.Code + `&b="}`
}

func bypass2All(v vals) string {
	return `{"a":"&phone=` + q(v.Victim) + `&username=` + q(v.User) + `&email=` + q(v.Email) + `&challenge_id=` + q(v.Chal) + `&code=` + v.Code +
		`&b=","phone":"` + v.Decoy + `","username":"` + v.UserDecoy + `","email":"` + v.EmailDecoy + `","challenge_id":"` + v.ChalDecoy + `"}`
}

type bodyFunc struct {
	name  string
	build func(vals) string
}

var typedBodies = []bodyFunc{
	{"form", formBody}, {"json", jsonBody}, {"bypass-1", bypass1All}, {"bypass-2", bypass2All},
}

// formTypes and jsonTypes are spellings of the two types the edge reads,
// and near misses of them (RFC 9110 §8.3.1: type "/" subtype *( OWS ";"
// OWS parameter ); case-insensitive type, subtype and parameter names).
var (
	formTypes = []string{
		formType,
		formType + "; charset=UTF-8",
		formType + ";charset=utf-8",
		"APPLICATION/X-WWW-FORM-URLENCODED",
		"Application/X-Www-Form-Urlencoded; Charset=\"UTF-8\"",
		formType + ",x",
		formType + ", x",
		formType + " x",
		formType + "foo",
		formType + "/",
		formType + "/x",
		formType + ";",
		formType + " ; charset=utf-8",
		formType + "\t;charset=utf-8",
		formType + "; boundary=x",
		formType + "; charset=utf-8; charset=iso-8859-1",
		formType + ",application/json",
		formType + ", application/json",
		"application/x-www-form-urlencode",
		"x-www-form-urlencoded",
		"application/x-www-form-urlencoded\x0b",
		"application/ x-www-form-urlencoded",
		"application /x-www-form-urlencoded",
		"\"application/x-www-form-urlencoded\"",
	}
	jsonTypes = []string{
		jsonType,
		jsonType + "; charset=utf-8",
		"APPLICATION/JSON",
		"Application/Json; Charset=UTF-8",
		jsonType + ",x",
		jsonType + " x",
		jsonType + "foo",
		jsonType + "/",
		jsonType + ";",
		jsonType + ", " + formType,
		"application/vnd.api+json",
		"application/problem+json; charset=utf-8",
		"application/+json",
		"text/json",
		"application/json-patch+json",
	}
	charsetTypes = []string{
		formType + "; charset=iso-8859-1",
		formType + "; charset=utf-16",
		formType + "; charset=us-ascii",
		formType + "; charset=\"utf-8\"",
		formType + "; charset=utf8",
		jsonType + "; charset=utf-16",
		jsonType + "; charset=iso-8859-1",
		jsonType + "; charset=\"utf-8\"",
	}
	otherTypes = []string{
		"", "text/plain", "text/plain; charset=utf-8", "application/octet-stream", "*/*", "application/*",
		"text/html", "application/xml", "multipart/form-data", "multipart/form-data; boundary=b", "application/x-www-form-urlencoded/json",
	}
)

// multipartBody writes a multipart/form-data body (RFC 7578) of the
// name/value pairs with boundary b.
func multipartBody(b string, pairs ...string) string {
	var s strings.Builder
	for i := 0; i+1 < len(pairs); i += 2 {
		fmt.Fprintf(&s, "--%s\r\nContent-Disposition: form-data; name=\"%s\"\r\n\r\n%s\r\n", b, pairs[i], pairs[i+1])
	}
	s.WriteString("--" + b + "--\r\n")
	return s.String()
}

func gz(s string) []byte {
	var b bytes.Buffer
	w := gzip.NewWriter(&b)
	w.Write([]byte(s))
	w.Close()
	return b.Bytes()
}

func deflate(s string) []byte {
	// Content-Encoding: deflate is the zlib format (RFC 9110 §8.4.1.2).
	var raw bytes.Buffer
	w, _ := flate.NewWriter(&raw, flate.DefaultCompression)
	w.Write([]byte(s))
	w.Close()
	// zlib header (deflate, 32K window, no dictionary), then the data and
	// its Adler-32.
	out := []byte{0x78, 0x9c}
	out = append(out, raw.Bytes()...)
	a, b := uint32(1), uint32(0)
	for i := 0; i < len(s); i++ {
		a = (a + uint32(s[i])) % 65521
		b = (b + a) % 65521
	}
	sum := b<<16 | a
	return append(out, byte(sum>>24), byte(sum>>16), byte(sum>>8), byte(sum))
}

// typed is a request with Content-Type ct (none when ct is "\x00none").
func typed(ct string, body string) request {
	r := request{Body: []byte(body)}
	if ct != noType {
		r.Header = [][2]string{{"Content-Type", ct}}
	}
	return r
}

// noType stands for "no Content-Type header" in a case table.
const noType = "\x00none"

// corpus returns the hostile requests: every seam of issue 9's item 1,
// both known bypasses, and each body kind under each Content-Type spelling.
func corpus() []corpusCase {
	var cs []corpusCase
	add := func(class, detail string, build func(v vals) request) {
		cs = append(cs, corpusCase{Name: class + "/" + detail, Class: class, Build: build})
	}
	// The bypass bodies as it sent them: phone only.
	for _, ct := range []string{formType + ",x", formType + " x", formType + "foo", formType + "/", formType, noType, jsonType} {
		ct := ct
		add(classBypass, fmt.Sprintf("%q/1", ct), func(v vals) request { return typed(ct, bypass1(v)) })
		add(classBypass, fmt.Sprintf("%q/2", ct), func(v vals) request { return typed(ct, bypass2(v)) })
	}
	add("plain", "json", func(v vals) request { return typed(jsonType, jsonBody(v)) })
	add("plain", "form", func(v vals) request { return typed(formType, formBody(v)) })
	cs[len(cs)-1].MustForward, cs[len(cs)-2].MustForward = true, true
	// Each body kind under each spelling of a type.
	for _, set := range []struct {
		class string
		types []string
	}{{classType, formTypes}, {classType, jsonTypes}, {classCharset, charsetTypes}, {classOtherType, otherTypes}} {
		for _, ct := range set.types {
			for _, b := range typedBodies {
				ct, b := ct, b
				add(set.class, fmt.Sprintf("%q/%s", ct, b.name), func(v vals) request { return typed(ct, b.build(v)) })
			}
		}
	}
	for _, b := range typedBodies {
		b := b
		add(classNoType, b.name, func(v vals) request { return typed(noType, b.build(v)) })
		add(classNoType, b.name+"/leading-space", func(v vals) request { return typed(noType, " \r\n"+b.build(v)) })
	}
	add(classNoType, "form/get", func(v vals) request { r := typed(noType, formBody(v)); r.Method = "GET"; return r })
	// Two Content-Type headers: origins take the first, the last, or join them.
	for _, pair := range [][2]string{{formType, jsonType}, {jsonType, formType}, {formType, formType}, {"text/plain", formType}, {formType, "text/plain"}} {
		for _, b := range typedBodies {
			pair, b := pair, b
			add(classTwoTypes, fmt.Sprintf("%q+%q/%s", pair[0], pair[1], b.name), func(v vals) request {
				return typed(pair[0], b.build(v)).withHeader("Content-Type", pair[1])
			})
		}
	}
	add(classTwoTypes, "lower-case-second", func(v vals) request {
		return typed(jsonType, bypass1All(v)).withHeader("content-type", formType)
	})

	// multipart/form-data: the edge reads neither part as a field today.
	mp := func(v vals) string {
		return multipartBody("XyZ", "phone", v.Victim, "username", v.User, "challenge_id", v.Chal, "code", v.Code)
	}
	for _, ct := range []string{"multipart/form-data; boundary=XyZ", "multipart/form-data; boundary=\"XyZ\"", "MULTIPART/FORM-DATA; BOUNDARY=XyZ", "multipart/form-data;boundary=XyZ;charset=utf-8", "multipart/mixed; boundary=XyZ"} {
		ct := ct
		add(classMultipart, fmt.Sprintf("%q", ct), func(v vals) request { return typed(ct, mp(v)) })
	}
	add(classMultipart, "duplicate-parts", func(v vals) request {
		return typed("multipart/form-data; boundary=XyZ", multipartBody("XyZ", "phone", v.Decoy, "phone", v.Victim, "username", v.UserDecoy, "username", v.User))
	})
	add(classMultipart, "file-part", func(v vals) request {
		body := "--XyZ\r\nContent-Disposition: form-data; name=\"phone\"; filename=\"p.txt\"\r\nContent-Type: text/plain\r\n\r\n" + v.Victim + "\r\n--XyZ\r\nContent-Disposition: form-data; name=\"username\"\r\n\r\n" + v.User + "\r\n--XyZ--\r\n"
		return typed("multipart/form-data; boundary=XyZ", body)
	})
	add(classMultipart, "as-form-type", func(v vals) request { return typed(formType, mp(v)) })
	add(classMultipart, "json-in-part", func(v vals) request {
		return typed("multipart/form-data; boundary=XyZ", multipartBody("XyZ", "phone", v.Victim)+"&phone="+q(v.Decoy))
	})
	add(classMultipart, "form-then-multipart-type", func(v vals) request {
		return typed(formType, "phone="+q(v.Decoy)+"&x=1").withHeader("Content-Type", "multipart/form-data; boundary=XyZ")
	})

	// Content-Encoding: Express inflates gzip and deflate bodies.
	for _, enc := range []struct {
		name string
		ce   string
		z    func(string) []byte
	}{{"gzip", "gzip", gz}, {"GZIP", "GZIP", gz}, {"x-gzip", "x-gzip", gz}, {"deflate", "deflate", deflate}, {"gzip-identity", "gzip, identity", gz}} {
		for _, b := range []bodyFunc{{"form", formBody}, {"json", jsonBody}} {
			for _, ct := range []string{formType, jsonType, noType} {
				enc, b, ct := enc, b, ct
				add(classEncoding, fmt.Sprintf("%s/%s/%q", enc.name, b.name, ct), func(v vals) request {
					r := typed(ct, "")
					r.Body = enc.z(b.build(v))
					return r.withHeader("Content-Encoding", enc.ce)
				})
			}
		}
	}
	add(classEncoding, "identity/form", func(v vals) request {
		return typed(formType, formBody(v)).withHeader("Content-Encoding", "identity")
	})
	add(classEncoding, "gzip-not-compressed/form", func(v vals) request {
		return typed(formType, formBody(v)).withHeader("Content-Encoding", "gzip")
	})
	add(classEncoding, "br/form", func(v vals) request {
		return typed(formType, formBody(v)).withHeader("Content-Encoding", "br")
	})

	// A field in the query and in the body (PHP's $_REQUEST, Flask's
	// request.values, Rack's params, Go's FormValue merge them).
	decoyForm := func(v vals) string {
		return "phone=" + q(v.Decoy) + "&username=" + q(v.UserDecoy) + "&email=" + q(v.EmailDecoy) + "&challenge_id=" + q(v.ChalDecoy)
	}
	decoyJSON := func(v vals) string {
		return `{"phone":"` + v.Decoy + `","username":"` + v.UserDecoy + `","email":"` + v.EmailDecoy + `","challenge_id":"` + v.ChalDecoy + `"}`
	}
	victimQuery := func(v vals) string {
		return "phone=" + q(v.Victim) + "&username=" + q(v.User) + "&email=" + q(v.Email) + "&challenge_id=" + q(v.Chal)
	}
	add(classQueryBody, "form", func(v vals) request { r := typed(formType, decoyForm(v)); r.Query = victimQuery(v); return r })
	add(classQueryBody, "json", func(v vals) request { r := typed(jsonType, decoyJSON(v)); r.Query = victimQuery(v); return r })
	add(classQueryBody, "form-other-fields", func(v vals) request {
		r := typed(formType, "code="+v.Code)
		r.Query = victimQuery(v)
		return r
	})
	add(classQueryBody, "multipart", func(v vals) request {
		r := typed("multipart/form-data; boundary=XyZ", multipartBody("XyZ", "phone", v.Decoy, "username", v.UserDecoy, "challenge_id", v.ChalDecoy))
		r.Query = victimQuery(v)
		return r
	})
	add(classQueryBody, "bypass-1", func(v vals) request {
		r := typed(formType+",x", bypass1All(v))
		r.Query = "phone=" + q(v.Victim)
		return r
	})
	add(classQuery, "plain", func(v vals) request { return request{Query: victimQuery(v)} })
	add(classQuery, "get", func(v vals) request { return request{Method: "GET", Query: victimQuery(v)} })
	add(classQuery, "duplicates", func(v vals) request {
		return request{Query: "phone=" + q(v.Decoy) + "&phone=" + q(v.Victim) + "&username=" + q(v.UserDecoy) + "&username=" + q(v.User) + "&challenge_id=" + q(v.ChalDecoy) + "&challenge_id=" + q(v.Chal)}
	})
	add(classQuery, "semicolons", func(v vals) request {
		return request{Query: "a=1;phone=" + q(v.Victim) + ";username=" + q(v.User) + ";challenge_id=" + q(v.Chal)}
	})
	add(classQuery, "semicolon-after-decoy", func(v vals) request {
		return request{Query: "phone=" + q(v.Decoy) + ";phone=" + q(v.Victim) + "&username=" + q(v.UserDecoy) + ";username=" + q(v.User)}
	})
	add(classQuery, "array", func(v vals) request {
		return request{Query: "phone[]=" + q(v.Victim) + "&username[]=" + q(v.User) + "&challenge_id[]=" + q(v.Chal)}
	})
	add(classQuery, "mangled", func(v vals) request {
		return request{Query: "ph.one=" + q(v.Victim) + "&challenge.id=" + q(v.Chal) + "&challenge%20id=" + q(v.Chal) + "&user+name=" + q(v.User)}
	})
	add(classQuery, "mangled-after-decoy", func(v vals) request {
		return request{Query: "challenge_id=" + q(v.ChalDecoy) + "&challenge.id=" + q(v.Chal)}
	})
	add(classQuery, "nul-in-name", func(v vals) request {
		return request{Query: "phone%00x=" + q(v.Victim) + "&username%00=" + q(v.User) + "&challenge_id%00.=" + q(v.Chal)}
	})
	add(classQuery, "encoded-name", func(v vals) request {
		return request{Query: "%70hone=" + q(v.Victim) + "&user%6eame=" + q(v.User) + "&challenge%5Fid=" + q(v.Chal)}
	})
	add(classQuery, "bad-escape-then-field", func(v vals) request {
		return request{Query: "x=%zz&phone=" + q(v.Victim) + "&username=" + q(v.User)}
	})
	add(classQuery, "fragment", func(v vals) request {
		return request{Query: "username=" + q(v.UserDecoy) + "#&username=" + q(v.User) + "&phone=" + q(v.Victim)}
	})
	add(classQuery, "plus-and-space", func(v vals) request {
		return request{Query: "username=" + strings.ReplaceAll(v.User, "0", "+") + "&challenge_id=" + strings.ReplaceAll(v.Chal, "0", "%20")}
	})

	// JSON duplicate keys, with case and escape variants: Go's struct
	// decoding matches case-insensitively (the last match wins), the rest
	// take the last exact key.
	dupJSON := map[string]func(v vals) string{
		"same":             func(v vals) string { return `{"phone":"` + v.Decoy + `","phone":"` + v.Victim + `"}` },
		"upper":            func(v vals) string { return `{"phone":"` + v.Decoy + `","PHONE":"` + v.Victim + `"}` },
		"upper-first":      func(v vals) string { return `{"PHONE":"` + v.Victim + `","phone":"` + v.Decoy + `"}` },
		"title":            func(v vals) string { return `{"Phone":"` + v.Victim + `"}` },
		"escaped":          func(v vals) string { return `{"phone":"` + v.Decoy + `","ph\u006fne":"` + v.Victim + `"}` },
		"long-s":           func(v vals) string { return `{"username":"` + v.UserDecoy + `","uſername":"` + v.User + `"}` },
		"kelvin-free-fold": func(v vals) string { return `{"username":"` + v.UserDecoy + `","USERNAME":"` + v.User + `"}` },
		"challenge-upper":  func(v vals) string { return `{"challenge_id":"` + v.ChalDecoy + `","CHALLENGE_ID":"` + v.Chal + `"}` },
		"email-upper":      func(v vals) string { return `{"email":"` + v.EmailDecoy + `","Email":"` + v.Email + `"}` },
		"email-same":       func(v vals) string { return `{"email":"` + v.EmailDecoy + `","email":"` + v.Email + `"}` },
		"identical":        func(v vals) string { return `{"phone":"` + v.Victim + `","phone":"` + v.Victim + `"}` },
		"nested-dup": func(v vals) string {
			return `{"user":{"phone":"` + v.Victim + `"},"phone":"` + v.Decoy + `","user":{"phone":"` + v.Decoy + `"}}`
		},
		"escaped-slash": func(v vals) string { return `{"phone":"` + strings.ReplaceAll(v.Victim, "+", `\u002b`) + `"}` },
		"trailing-space-key": func(v vals) string {
			return `{"phone ":"` + v.Victim + `","phone":"` + v.Decoy + `"}`
		},
		"empty-then-value": func(v vals) string { return `{"phone":"","phone":"` + v.Victim + `"}` },
		"null-then-value":  func(v vals) string { return `{"phone":null,"phone":"` + v.Victim + `"}` },
		"value-then-null":  func(v vals) string { return `{"phone":"` + v.Victim + `","phone":null}` },
	}
	for _, name := range sortedKeys(dupJSON) {
		f := dupJSON[name]
		add(classDupJSON, name, func(v vals) request { return typed(jsonType, f(v)) })
		add(classDupJSON, name+"/no-type", func(v vals) request { return typed(noType, f(v)) })
	}

	// Nested and array values.
	nestedJSON := map[string]func(v vals) string{
		"array":        func(v vals) string { return `{"phone":["` + v.Victim + `"],"username":["` + v.User + `"]}` },
		"array-two":    func(v vals) string { return `{"phone":["` + v.Decoy + `","` + v.Victim + `"]}` },
		"object":       func(v vals) string { return `{"phone":{"n":"` + v.Victim + `"},"username":{"n":"` + v.User + `"}}` },
		"array-object": func(v vals) string { return `{"phone":[{"n":"` + v.Victim + `"}]}` },
		"number":       func(v vals) string { return `{"phone":` + strings.TrimPrefix(v.Victim, "+") + `}` },
		"float":        func(v vals) string { return `{"phone":` + strings.TrimPrefix(v.Victim, "+") + `.0}` },
		"exponent":     func(v vals) string { return `{"phone":` + strings.TrimPrefix(v.Victim, "+") + `e0}` },
		"true":         func(v vals) string { return `{"phone":true,"username":true,"a":"` + v.Victim + `"}` },
		"number-user":  func(v vals) string { return `{"username":12345,"challenge_id":67890}` },
		"top-array":    func(v vals) string { return `[{"phone":"` + v.Victim + `"}]` },
		"top-string":   func(v vals) string { return `"phone=` + q(v.Victim) + `"` },
	}
	for _, name := range sortedKeys(nestedJSON) {
		f := nestedJSON[name]
		add(classNested, "json/"+name, func(v vals) request { return typed(jsonType, f(v)) })
	}
	nestedForm := map[string]func(v vals) string{
		"brackets": func(v vals) string {
			return "phone[]=" + q(v.Victim) + "&username[]=" + q(v.User) + "&challenge_id[]=" + q(v.Chal)
		},
		"index":          func(v vals) string { return "phone[0]=" + q(v.Victim) + "&username[0]=" + q(v.User) },
		"key":            func(v vals) string { return "phone[n]=" + q(v.Victim) + "&username[n]=" + q(v.User) },
		"flat-then-arr":  func(v vals) string { return "phone=" + q(v.Decoy) + "&phone[]=" + q(v.Victim) },
		"arr-then-flat":  func(v vals) string { return "phone[]=" + q(v.Victim) + "&phone=" + q(v.Decoy) },
		"two-arr":        func(v vals) string { return "phone[]=" + q(v.Decoy) + "&phone[]=" + q(v.Victim) },
		"unclosed":       func(v vals) string { return "phone[=" + q(v.Victim) + "&challenge[id=" + q(v.Chal) },
		"encoded-braces": func(v vals) string { return "phone%5B%5D=" + q(v.Victim) + "&username%5B0%5D=" + q(v.User) },
		"dots-qs":        func(v vals) string { return "user.phone=" + q(v.Victim) + "&phone.x=" + q(v.Victim) },
		"proto":          func(v vals) string { return "__proto__[phone]=" + q(v.Victim) + "&constructor[username]=" + q(v.User) },
	}
	for _, name := range sortedKeys(nestedForm) {
		f := nestedForm[name]
		add(classNested, "form/"+name, func(v vals) request { return typed(formType, f(v)) })
	}

	// Byte order marks.
	const bom = "\xef\xbb\xbf"
	for _, ct := range []string{jsonType, formType, noType, "text/plain"} {
		ct := ct
		add(classBOM, fmt.Sprintf("json/%q", ct), func(v vals) request { return typed(ct, bom+jsonBody(v)) })
		add(classBOM, fmt.Sprintf("form/%q", ct), func(v vals) request { return typed(ct, bom+formBody(v)) })
		add(classBOM, fmt.Sprintf("bypass-1/%q", ct), func(v vals) request { return typed(ct, bom+bypass1All(v)) })
	}
	add(classBOM, "encoded-in-name", func(v vals) request {
		return typed(formType, "%EF%BB%BFphone="+q(v.Victim)+"&%EF%BB%BFusername="+q(v.User))
	})
	add(classBOM, "in-value", func(v vals) request {
		return typed(jsonType, `{"phone":"`+bom+v.Victim+`","username":"`+bom+v.User+`"}`)
	})
	add(classBOM, "utf16-bom-json", func(v vals) request { return typed(jsonType, "\xfe\xff"+jsonBody(v)) })

	// NULs.
	nul := map[string]func(v vals) request{
		"json-escaped-in-value": func(v vals) request {
			return typed(jsonType, `{"phone":"`+v.Victim+`\u0000","username":"`+v.User+`\u0000x"}`)
		},
		"json-escaped-in-key": func(v vals) request {
			return typed(jsonType, `{"phone\u0000":"`+v.Victim+`","username\u0000x":"`+v.User+`","phone":"`+v.Decoy+`"}`)
		},
		"json-raw-in-value": func(v vals) request { return typed(jsonType, `{"phone":"`+v.Victim+"\x00"+`"}`) },
		"json-raw-after":    func(v vals) request { return typed(jsonType, jsonBody(v)+"\x00") },
		"json-raw-before":   func(v vals) request { return typed(jsonType, "\x00"+jsonBody(v)) },
		"json-raw-after-form-type": func(v vals) request {
			return typed(formType, "\x00"+bypass1All(v))
		},
		"form-encoded-in-value": func(v vals) request {
			return typed(formType, "phone="+q(v.Victim)+"%00&username="+q(v.User)+"%00x")
		},
		"form-encoded-in-name": func(v vals) request {
			return typed(formType, "phone%00="+q(v.Victim)+"&username%00x="+q(v.User)+"&challenge_id%00y="+q(v.Chal))
		},
		"form-encoded-in-name-after-decoy": func(v vals) request {
			return typed(formType, "phone="+q(v.Decoy)+"&phone%00x="+q(v.Victim))
		},
		"form-raw-in-value": func(v vals) request { return typed(formType, "phone="+q(v.Victim)+"\x00&username="+q(v.User)) },
		"form-raw-in-name":  func(v vals) request { return typed(formType, "phone\x00x="+q(v.Victim)+"&username\x00="+q(v.User)) },
		"form-raw-before":   func(v vals) request { return typed(formType, "\x00&"+formBody(v)) },
	}
	for _, name := range sortedKeys(nul) {
		add(classNUL, name, nul[name])
	}

	// Overlong and invalid UTF-8.
	over := map[string]func(v vals) request{
		"form-value": func(v vals) request {
			return typed(formType, "phone="+q(v.Victim)+"%C0%AE&username="+q(v.User)+"%C0%80")
		},
		"form-name": func(v vals) request { return typed(formType, "ph%C1%AFne="+q(v.Victim)+"&%C1%B5sername="+q(v.User)) },
		"form-invalid-value": func(v vals) request {
			return typed(formType, "username="+q(v.User)+"%FF&challenge_id="+q(v.Chal)+"%ED%A0%80")
		},
		"form-invalid-name": func(v vals) request { return typed(formType, "phone%FF="+q(v.Victim)+"&username="+q(v.User)) },
		"json-raw-value": func(v vals) request {
			return typed(jsonType, `{"phone":"`+v.Victim+"\xc0\xae"+`","username":"`+v.User+"\xff"+`"}`)
		},
		"json-raw-key": func(v vals) request {
			return typed(jsonType, `{"ph`+"\xc1\xaf"+`ne":"`+v.Victim+`","phone":"`+v.Decoy+`"}`)
		},
		"json-lone-surrogate": func(v vals) request {
			return typed(jsonType, `{"username":"`+v.User+`\ud800","challenge_id":"`+v.Chal+`\udfff"}`)
		},
		"json-invalid-in-other-key": func(v vals) request {
			return typed(jsonType, `{"x":"`+"\xff"+`","phone":"`+v.Victim+`","username":"`+v.User+`"}`)
		},
		"query-value": func(v vals) request {
			return request{Query: "username=" + q(v.User) + "%FF&challenge_id=" + q(v.Chal) + "%C0%AE"}
		},
		"form-overlong-ampersand": func(v vals) request {
			return typed(formType, "a=%C0%A6phone%C0%BD"+q(v.Victim)+"&username="+q(v.User))
		},
	}
	for _, name := range sortedKeys(over) {
		add(classOverlong, name, over[name])
	}

	// PHP's name mangling (php_register_variable_ex): leading spaces go,
	// ' ', '.' and an unclosed '[' become '_', a NUL ends the name.
	mangle := map[string]func(v vals) string{
		"dot":           func(v vals) string { return "ph.one=" + q(v.Victim) + "&challenge.id=" + q(v.Chal) },
		"space":         func(v vals) string { return "ph+one=" + q(v.Victim) + "&challenge+id=" + q(v.Chal) },
		"space-encoded": func(v vals) string { return "ph%20one=" + q(v.Victim) + "&challenge%20id=" + q(v.Chal) },
		"bracket":       func(v vals) string { return "challenge[id=" + q(v.Chal) + "&user[name=" + q(v.User) },
		"leading-space": func(v vals) string {
			return "+phone=" + q(v.Victim) + "&%20username=" + q(v.User) + "&++challenge_id=" + q(v.Chal)
		},
		"after-decoy":       func(v vals) string { return "challenge_id=" + q(v.ChalDecoy) + "&challenge.id=" + q(v.Chal) },
		"before-decoy":      func(v vals) string { return "challenge.id=" + q(v.Chal) + "&challenge_id=" + q(v.ChalDecoy) },
		"leading-space-dup": func(v vals) string { return "phone=" + q(v.Decoy) + "&+phone=" + q(v.Victim) },
		"trailing-dot":      func(v vals) string { return "phone.=" + q(v.Victim) + "&username[]x=" + q(v.User) },
		"phone-array":       func(v vals) string { return "phone[]=" + q(v.Victim) },
		"mixed-underscore":  func(v vals) string { return "challenge.id=" + q(v.Chal) + "&challenge id=" + q(v.ChalDecoy) },
	}
	for _, name := range sortedKeys(mangle) {
		f := mangle[name]
		add(classMangling, name, func(v vals) request { return typed(formType, f(v)) })
	}

	// Form fields given twice, and separators.
	formDup := map[string]func(v vals) string{
		"decoy-first":  func(v vals) string { return "phone=" + q(v.Decoy) + "&phone=" + q(v.Victim) },
		"victim-first": func(v vals) string { return "phone=" + q(v.Victim) + "&phone=" + q(v.Decoy) },
		"username":     func(v vals) string { return "username=" + q(v.UserDecoy) + "&username=" + q(v.User) },
		"email":        func(v vals) string { return "email=" + q(v.EmailDecoy) + "&email=" + q(v.Email) },
		"empty-first":  func(v vals) string { return "phone=&phone=" + q(v.Victim) + "&username=&username=" + q(v.User) },
		"no-equals":    func(v vals) string { return "phone&phone=" + q(v.Victim) + "&username&username=" + q(v.User) },
		"semicolon": func(v vals) string {
			return "phone=" + q(v.Decoy) + ";phone=" + q(v.Victim) + "&username=" + q(v.UserDecoy) + ";username=" + q(v.User)
		},
		"semicolon-only": func(v vals) string {
			return "a=1;phone=" + q(v.Victim) + ";username=" + q(v.User)
		},
		"unescaped-plus": func(v vals) string { return "phone=" + v.Victim + "&username=" + q(v.User) },
		"raw-ampersand-in-json-string": func(v vals) string {
			return `x={"a":"&phone=` + q(v.Victim) + `&b="}`
		},
		"bad-escape-first": func(v vals) string { return "x=%zz&phone=" + q(v.Victim) + "&username=" + q(v.User) },
		"crlf":             func(v vals) string { return formBody(v) + "\r\n" },
		"leading-amps":     func(v vals) string { return "&&" + formBody(v) + "&&" },
		"many-fields":      func(v vals) string { return strings.Repeat("x=1&", 1100) + formBody(v) },
	}
	for _, name := range sortedKeys(formDup) {
		f := formDup[name]
		add(classFormDup, name, func(v vals) request { return typed(formType, f(v)) })
	}

	// Methods: PHP fills $_POST for POST only, Go parses PUT and PATCH
	// bodies too, Express and Rack read any.
	for _, m := range []string{"PUT", "PATCH", "DELETE", "GET", "OPTIONS", "post"} {
		for _, b := range []bodyFunc{{"form", formBody}, {"json", jsonBody}, {"bypass-1", bypass1All}} {
			m, b := m, b
			ct := formType
			if b.name == "json" {
				ct = jsonType
			}
			if b.name == "bypass-1" {
				ct = formType + ",x"
			}
			add(classMethod, m+"/"+b.name, func(v vals) request { r := typed(ct, b.build(v)); r.Method = m; return r })
		}
	}
	add(classMethod, "override-header", func(v vals) request {
		r := typed(formType, formBody(v))
		r.Method = "GET"
		return r.withHeader("X-HTTP-Method-Override", "POST")
	})

	// Framing: chunked bodies, Expect, a body near and over max_body_bytes.
	for _, b := range []bodyFunc{{"form", formBody}, {"json", jsonBody}, {"bypass-1", bypass1All}} {
		b := b
		ct := map[string]string{"form": formType, "json": jsonType, "bypass-1": formType + ",x"}[b.name]
		add(classFraming, "chunked/"+b.name, func(v vals) request { r := typed(ct, b.build(v)); r.Chunked = true; return r })
		add(classFraming, "expect/"+b.name, func(v vals) request { return typed(ct, b.build(v)).withHeader("Expect", "100-continue") })
	}
	// Framing the edge re-frames: both Content-Length and chunked (RFC
	// 9112 §6.3: chunked wins, or refuse), and a Content-Type folded onto
	// a second line (obs-fold, §5.2).
	add(classFraming, "chunked-and-length/bypass-1", func(v vals) request {
		r := typed(formType+",x", bypass1All(v))
		r.Chunked = true
		return r.withHeader("Content-Length", "4")
	})
	add(classFraming, "chunked-upper/form", func(v vals) request {
		body := formBody(v)
		r := typed(formType, fmt.Sprintf("%x\r\n%s\r\n0\r\n\r\n", len(body), body)).withHeader("Transfer-Encoding", "Chunked")
		r.Framed = true
		return r
	})
	add(classFraming, "obs-fold-type/bypass-1", func(v vals) request {
		return typed(formType+"\r\n ,x", bypass1All(v))
	})
	add(classFraming, "obs-fold-type/form", func(v vals) request {
		return typed("text/plain;\r\n\tx=y", formBody(v)).withHeader("Content-Type", formType)
	})
	add(classFraming, "near-limit/form", func(v vals) request {
		body := formBody(v)
		return typed(formType, "pad="+strings.Repeat("a", 65536-4-1-len(body))+"&"+body)
	})
	add(classFraming, "over-limit/form", func(v vals) request {
		return typed(formType, "pad="+strings.Repeat("a", 70000)+"&"+formBody(v))
	})
	add(classFraming, "near-limit/json", func(v vals) request {
		body := jsonBody(v)
		return typed(jsonType, `{"pad":"`+strings.Repeat("a", 65536-10-len(body))+`",`+body[1:])
	})

	// JSON syntax the parsers disagree on.
	syntax := map[string]func(v vals) string{
		"nan":            func(v vals) string { return `{"phone":"` + v.Victim + `","x":NaN}` },
		"infinity":       func(v vals) string { return `{"phone":"` + v.Victim + `","x":-Infinity}` },
		"trailing-comma": func(v vals) string { return `{"phone":"` + v.Victim + `",}` },
		"comment":        func(v vals) string { return `{"phone":"` + v.Victim + `"/*c*/}` },
		"single-quotes":  func(v vals) string { return `{'phone':'` + v.Victim + `'}` },
		"trailing-doc":   func(v vals) string { return `{"phone":"` + v.Victim + `"}{"phone":"` + v.Decoy + `"}` },
		"trailing-junk":  func(v vals) string { return `{"phone":"` + v.Victim + `"}x` },
		"leading-ws":     func(v vals) string { return "\t\r\n " + jsonBody(v) },
		"big-int":        func(v vals) string { return `{"phone":"` + v.Victim + `","n":123456789012345678901234567890}` },
		"deep": func(v vals) string {
			return `{"phone":"` + v.Victim + `","d":` + strings.Repeat("[", 600) + strings.Repeat("]", 600) + `}`
		},
		"control-char":   func(v vals) string { return `{"phone":"` + v.Victim + "\t" + `"}` },
		"unicode-digits": func(v vals) string { return `{"phone":"` + fullWidth(v.Victim) + `"}` },
		"formatted":      func(v vals) string { return `{"phone":"` + formatted(v.Victim) + `"}` },
	}
	for _, name := range sortedKeys(syntax) {
		f := syntax[name]
		add(classJSONSyntax, name, func(v vals) request { return typed(jsonType, f(v)) })
		add(classJSONSyntax, name+"/text-plain", func(v vals) request { return typed("text/plain", f(v)) })
	}

	// UTF-16 and UTF-32 JSON: Python's json.loads(bytes) detects them.
	for _, enc := range []struct {
		name string
		f    func(string) []byte
	}{{"utf-16le-bom", func(s string) []byte { return append([]byte{0xff, 0xfe}, utf16le(s)...) }},
		{"utf-16le", utf16le}, {"utf-16be", utf16be}, {"utf-32le", utf32le}} {
		for _, ct := range []string{jsonType, jsonType + "; charset=utf-16", "text/plain", noType, formType} {
			enc, ct := enc, ct
			add(classUTF16, fmt.Sprintf("%s/%q", enc.name, ct), func(v vals) request {
				r := typed(ct, "")
				r.Body = enc.f(jsonBody(v))
				return r
			})
		}
	}
	return cs
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	// Deterministic order, so a case's send index (and its values) is the
	// same on every run.
	for i := 1; i < len(keys); i++ {
		for j := i; j > 0 && keys[j] < keys[j-1]; j-- {
			keys[j], keys[j-1] = keys[j-1], keys[j]
		}
	}
	return keys
}

// fullWidth writes the digits of s as full-width digits (U+FF10…).
func fullWidth(s string) string {
	var b strings.Builder
	for _, r := range s {
		if r >= '0' && r <= '9' {
			r += 0xff10 - '0'
		}
		b.WriteRune(r)
	}
	return b.String()
}

// formatted writes an E.164 number with spaces and dashes.
func formatted(s string) string {
	if len(s) < 8 {
		return s
	}
	return s[:2] + " (" + s[2:5] + ") " + s[5:8] + "-" + s[8:]
}

func utf16le(s string) []byte {
	var b []byte
	for _, r := range s {
		b = append(b, byte(r), byte(r>>8))
	}
	return b
}

func utf16be(s string) []byte {
	var b []byte
	for _, r := range s {
		b = append(b, byte(r>>8), byte(r))
	}
	return b
}

func utf32le(s string) []byte {
	var b []byte
	for _, r := range s {
		b = append(b, byte(r), byte(r>>8), byte(r>>16), byte(r>>24))
	}
	return b
}

// fuzzTypes are the Content-Types fuzzed requests draw from.
func fuzzTypes() []string {
	var ts []string
	ts = append(ts, formTypes...)
	ts = append(ts, jsonTypes...)
	ts = append(ts, charsetTypes...)
	ts = append(ts, otherTypes...)
	return append(ts, noType)
}

// fuzzCases returns n requests made by mutating corpus cases, seeded: case
// i of seed s is the same on every run (its values aside).
func fuzzCases(base []corpusCase, n int, seed uint64) []corpusCase {
	types := fuzzTypes()
	cs := make([]corpusCase, 0, n)
	for i := range n {
		i := i
		cs = append(cs, corpusCase{
			Name:  fmt.Sprintf("%s/seed=%d/%d", classFuzz, seed, i),
			Class: classFuzz,
			Build: func(v vals) request {
				r := rand.New(rand.NewPCG(seed, uint64(i)))
				req := base[r.IntN(len(base))].Build(v)
				for range 1 + r.IntN(3) {
					req = mutate(r, req, v, types)
				}
				return req
			},
		})
	}
	return cs
}

// mutate applies one random mutation to the type, the encoding, the body
// or the query of req. Inserted fields name the send's own values, so
// whatever an origin reads of them is attributable.
func mutate(r *rand.Rand, req request, v vals, types []string) request {
	req.Header = append([][2]string(nil), req.Header...)
	req.Body = append([]byte(nil), req.Body...)
	setType := func(ct string) {
		for i, h := range req.Header {
			if strings.EqualFold(h[0], "Content-Type") {
				if ct == noType {
					req.Header = append(req.Header[:i], req.Header[i+1:]...)
				} else {
					req.Header[i][1] = ct
				}
				return
			}
		}
		if ct != noType {
			req.Header = append(req.Header, [2]string{"Content-Type", ct})
		}
	}
	snippets := []string{
		"&phone=" + q(v.Victim) + "&", "&phone=" + q(v.Decoy), "&username=" + q(v.User) + "&", "&challenge_id=" + q(v.Chal),
		`"phone":"` + v.Victim + `",`, `,"username":"` + v.User + `"`, `{"phone":"` + v.Victim + `"}`,
		"\x00", "%00", "\xef\xbb\xbf", "[", "]", "[]", ".", " ", "+", ";", "{", "}", `"`, `\`, "%", "=", "&", "\r\n",
		"\xc0\xae", "%C0%AE", "\xff", "%FF", "ph.one=" + q(v.Victim) + "&", "challenge.id=" + q(v.Chal) + "&",
		"phone[]=" + q(v.Victim) + "&", `\u0000`, `"PHONE":"` + v.Victim + `",`,
	}
	switch r.IntN(9) {
	case 0: // another Content-Type
		setType(types[r.IntN(len(types))])
	case 1: // a mutated Content-Type
		ct, _ := req.header("Content-Type")
		b := []byte(ct)
		if len(b) == 0 {
			b = []byte(formType)
		}
		switch r.IntN(4) {
		case 0:
			i := r.IntN(len(b))
			b[i] ^= 0x20 // flips the case of a letter
		case 1:
			ins := []string{",", ";", " ", "/", "x", "\t", "=", "\"", "+json", "; charset=utf-8", "; charset=latin1", ",x"}
			i := r.IntN(len(b) + 1)
			b = append(b[:i], append([]byte(ins[r.IntN(len(ins))]), b[i:]...)...)
		case 2:
			b = b[:r.IntN(len(b))]
		case 3:
			b = append(b, []byte(ins2[r.IntN(len(ins2))])...)
		}
		setType(string(b))
	case 2: // a Content-Encoding
		ces := []string{"gzip", "deflate", "identity", "br", "GZIP"}
		ce := ces[r.IntN(len(ces))]
		if ce == "gzip" || ce == "GZIP" {
			req.Body = gz(string(req.Body))
		} else if ce == "deflate" {
			req.Body = deflate(string(req.Body))
		}
		req.Header = append(req.Header, [2]string{"Content-Encoding", ce})
	case 3, 4: // a snippet inserted into the body
		s := snippets[r.IntN(len(snippets))]
		i := r.IntN(len(req.Body) + 1)
		req.Body = append(req.Body[:i], append([]byte(s), req.Body[i:]...)...)
	case 5: // a body byte changed or dropped
		if len(req.Body) > 0 {
			i := r.IntN(len(req.Body))
			if r.IntN(2) == 0 {
				req.Body = append(req.Body[:i], req.Body[i+1:]...)
			} else {
				const bytes = "&=;[]. \x00{}\"%+"
				req.Body[i] = bytes[r.IntN(len(bytes))]
			}
		}
	case 6: // the query
		qs := []string{
			"phone=" + q(v.Victim), "phone=" + q(v.Decoy) + "&phone=" + q(v.Victim), "a=1;phone=" + q(v.Victim),
			"username=" + q(v.User), "challenge_id=" + q(v.Chal) + "&username=" + q(v.User), "phone[]=" + q(v.Victim),
			"ph.one=" + q(v.Victim) + "&challenge.id=" + q(v.Chal),
		}
		if req.Query != "" && r.IntN(2) == 0 {
			req.Query += "&" + qs[r.IntN(len(qs))]
		} else {
			req.Query = qs[r.IntN(len(qs))]
		}
	case 7: // the method
		ms := []string{"POST", "PUT", "PATCH", "GET", "DELETE"}
		req.Method = ms[r.IntN(len(ms))]
	case 8: // a second Content-Type
		req.Header = append(req.Header, [2]string{"Content-Type", types[r.IntN(len(types)-1)]})
	}
	return req
}

var ins2 = []string{" ", ";", ",", "/", "x", ";charset=utf-8", "; boundary=XyZ"}
