package demo

import (
	"context"
	"net/http"
	"testing"
)

func TestListenAndServe(t *testing.T) {
	t.Parallel()
	if err := New().ListenAndServe(t.Context(), "127.0.0.1:-1"); err == nil {
		t.Errorf("ListenAndServe on a bad address: got nil, want an error")
	}

	// Serve, then stop at once: a shutdown racing the start still returns.
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- New().ListenAndServe(ctx, "127.0.0.1:0") }()
	cancel()
	if err := <-done; err != nil {
		t.Errorf("ListenAndServe after cancel: got %v, want nil", err)
	}
}

func TestServerHeaders(t *testing.T) {
	t.Parallel()
	base := startOrigin(t, New())
	resp, err := http.Get(base + "/api/x")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got := resp.Header.Get("Server"); got != "" {
		t.Errorf("Server header: got %q, want none", got)
	}
	if got := resp.Header.Get("Content-Type"); got != "application/json" {
		t.Errorf("Content-Type: got %q, want application/json", got)
	}
}
