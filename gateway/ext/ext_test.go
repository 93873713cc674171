package ext

import "testing"

// TestRequestBuffers: Env.Buffer hands out numbers in order; a Request's
// buffers are empty after Reset, keep their capacity from request to
// request, and a warm Reset allocates nothing.
func TestRequestBuffers(t *testing.T) {
	var env Env
	a, b := env.Buffer(), env.Buffer()
	if a != 0 || b != 1 || env.Buffers() != 2 {
		t.Fatalf("buffers %d, %d of %d, want 0, 1 of 2", a, b, env.Buffers())
	}
	var r Request
	r.Reset(env.Buffers())
	*r.Buffer(b) = append(*r.Buffer(b), "a fingerprint"...)
	r.Buf = append(r.Buf, "a header"...)
	r.Storable = true
	r.Reset(env.Buffers())
	if len(*r.Buffer(b)) != 0 || cap(*r.Buffer(b)) == 0 || cap(r.Buf) < 8 || r.Storable {
		t.Errorf("after Reset: buffer %q (cap %d), Buf's cap %d, Storable %v; want an empty buffer that kept its capacity, Buf's kept, Storable false",
			*r.Buffer(b), cap(*r.Buffer(b)), cap(r.Buf), r.Storable)
	}
	if n := testing.AllocsPerRun(100, func() { r.Reset(0); r.Reset(2) }); n != 0 {
		t.Errorf("a warm Reset allocates %.1f times, want 0", n)
	}
	if r.Reset(0); cap(r.buffers) < 2 {
		t.Errorf("Reset(0) dropped the buffers (cap %d)", cap(r.buffers))
	}
}
