package node_test

import (
	"strings"
	"testing"

	"github.com/edge-gateway/edge/builtin"
	. "github.com/edge-gateway/edge/node"
)

func TestValidateStoreURL(t *testing.T) {
	tests := []struct {
		in string
		ok bool
	}{
		{"redis://127.0.0.1:6379/0", true},
		{"redis://127.0.0.1:6379", true},
		{"redis://:secret@127.0.0.1:6379/2", true},
		{"redis+cluster://10.0.0.1:7000,10.0.0.2:7000", true},
		{"redis+cluster://10.0.0.1:7000/0", false},
		{"redis://a:1,b:2", false},
		{"redis://127.0.0.1", false},
		{"redis://127.0.0.1:6379/x", false},
		{"http://127.0.0.1:6379", false},
		{"memory", false},
		{"redis://:pa@ss/w0rd@127.0.0.1:6379/1", true},
		{"redis://:s3cret@127.0.0.1:6379/x", false},
		{"redis+cluster://user:s3cret@10.0.0.1:7000/0", false},
		{"redis://:s3cret@127.0.0.1", false},
		{"rediss://redis.internal:6380/0", true},
		{"rediss://edge:s3cret@redis.internal:6380", true},
		{"rediss://redis.internal:6380/0?skip_verify=true", false},
		{"redis://127.0.0.1:6379/0?dial_timeout=1", false},
		{"redis+sentinel://mymaster@10.0.0.1:26379,10.0.0.2:26379", true},
		{"redis+sentinel://mymaster@10.0.0.1:26379/3", true},
		{"rediss+sentinel://edge:s3cret@my.master-1@10.0.0.1:26379", true},
		{"redis+sentinel://edge:pa@ss@mymaster@10.0.0.1:26379", true},
		{"redis+sentinel://10.0.0.1:26379", false},
		{"redis+sentinel://edge:s3cret@10.0.0.1:26379", false},
		{"redis+sentinel://my master@10.0.0.1:26379", false},
		{"redis+sentinel://mymaster@10.0.0.1", false},
		{"redis+sentinel://mymaster@10.0.0.1:26379/x", false},
		{"rediss+cluster://10.0.0.1:7000", false},
		{"redisss://127.0.0.1:6379", false},
		{"unix:///run/redis.sock", false},
	}
	for _, tt := range tests {
		err := ValidateStoreURL(tt.in)
		if (err == nil) != tt.ok {
			t.Errorf("ValidateStoreURL(%q) = %v, want ok=%v", tt.in, err, tt.ok)
		}
		if err != nil && strings.Contains(err.Error(), "s3cret") {
			t.Errorf("ValidateStoreURL(%q): the error shows the password: %v", tt.in, err)
		}
	}
}

func TestRedactURL(t *testing.T) {
	tests := []struct{ in, want string }{
		{"redis://127.0.0.1:6379/0", "redis://127.0.0.1:6379/0"},
		{"redis://:s3cret@127.0.0.1:6379/0", "redis://xxxxx@127.0.0.1:6379/0"},
		{"redis://user:s3cret@127.0.0.1:6379", "redis://xxxxx@127.0.0.1:6379"},
		{"redis://:pa/ss@w0rd@127.0.0.1:6379/1", "redis://xxxxx@127.0.0.1:6379/1"},
		{"redis+cluster://u:p@10.0.0.1:7000,10.0.0.2:7000", "redis+cluster://xxxxx@10.0.0.1:7000,10.0.0.2:7000"},
		{"memory", "memory"},
		{"rediss://edge:s3cret@redis.internal:6380/0", "rediss://xxxxx@redis.internal:6380/0"},
		{"redis+sentinel://mymaster@10.0.0.1:26379", "redis+sentinel://mymaster@10.0.0.1:26379"},
		{"redis+sentinel://edge:s3cret@mymaster@10.0.0.1:26379/1", "redis+sentinel://xxxxx@mymaster@10.0.0.1:26379/1"},
		{"rediss+sentinel://edge:s3@cret@mymaster@10.0.0.1:26379", "rediss+sentinel://xxxxx@mymaster@10.0.0.1:26379"},
		// Credentials without a master's name: all hidden, never shown as one.
		{"redis+sentinel://edge:s3cret@10.0.0.1:26379", "redis+sentinel://xxxxx@10.0.0.1:26379"},
		{"redis+sentinel://:s3cret@10.0.0.1:26379", "redis+sentinel://xxxxx@10.0.0.1:26379"},
	}
	for _, tt := range tests {
		if got := RedactURL(tt.in); got != tt.want {
			t.Errorf("RedactURL(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// TestStoreURLPasswordNotInDiagnostics: a policy whose store url is wrong
// is refused without printing its password.
func TestStoreURLPasswordNotInDiagnostics(t *testing.T) {
	src := "store \"redis\" {\n  url = \"redis://:s3cret@127.0.0.1:6379/x\"\n}\n"
	_, diags := builtin.Load("p.hcl", []byte(src))
	if !diags.HasErrors() {
		t.Fatal("a bad database number was accepted")
	}
	if strings.Contains(diags.Error(), "s3cret") {
		t.Errorf("the diagnostics show the password: %v", diags)
	}
}
