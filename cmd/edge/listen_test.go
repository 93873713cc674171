package main

import (
	"net"
	"testing"
)

func TestAddrMatches(t *testing.T) {
	t.Parallel()
	tcp := func(ip string, port int) net.Addr { return &net.TCPAddr{IP: net.ParseIP(ip), Port: port} }
	tests := []struct {
		got  net.Addr
		want string
		ok   bool
	}{
		{tcp("127.0.0.1", 8080), "127.0.0.1:8080", true},
		{tcp("127.0.0.1", 8080), "localhost:8080", true},
		{tcp("127.0.0.1", 8080), "127.0.0.1:8081", false},
		{tcp("127.0.0.1", 8080), "127.0.0.2:8080", false},
		{tcp("127.0.0.1", 41234), "127.0.0.1:0", true}, // an ephemeral port: any
		{tcp("::", 443), ":443", true},
		{tcp("::", 443), "0.0.0.0:443", true},
		{tcp("0.0.0.0", 443), "[::]:443", true},
		{tcp("0.0.0.0", 443), "127.0.0.1:443", false},
		{tcp("::1", 80), "[::1]:http", true},
		{tcp("127.0.0.1", 80), "no-port", false},
		{&net.UnixAddr{Name: "/run/x", Net: "unix"}, "127.0.0.1:80", false},
	}
	for _, tt := range tests {
		if got := addrMatches(tt.got, tt.want); got != tt.ok {
			t.Errorf("addrMatches(%v, %q) = %v, want %v", tt.got, tt.want, got, tt.ok)
		}
	}
}
