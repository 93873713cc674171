package main

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/edge-gateway/edge/builtin"
	"github.com/edge-gateway/edge/internal/testredis"
)

// TestSentinelFailoverLossChecked: a node on a Sentinel-managed master
// reads its min-replicas-to-write at start and warns when it is 0 (a
// failover then forgets the counts the old master takes after its
// replica's promotion), and says it is fine when the master refuses writes
// without a replica. Against a real primary, replica and sentinel.
func TestSentinelFailoverLossChecked(t *testing.T) {
	p, diags := builtin.Load("p.hcl", []byte("store \"redis\" {\n  url     = \"redis://127.0.0.1:1/0\"\n  timeout = \"1s\"\n}\n"))
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	for _, tc := range []struct {
		name  string
		args  []string
		want  string
		level string
	}{
		{"min-replicas 0", nil, "A SENTINEL FAILOVER FORGETS COUNTERS", "WARN"},
		{"min-replicas 1", []string{"--min-replicas-to-write", "1", "--min-replicas-max-lag", "10"}, "sentinel master refuses writes without a replica", "INFO"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := testredis.StartSentinel(t, testredis.SentinelOptions{PrimaryArgs: tc.args})
			var logs bytes.Buffer
			st, _, _, err := openStore(p, s.URL(), minRedisKeySecret, slog.New(slog.NewJSONHandler(&logs, nil)))
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			var line string
			for l := range strings.Lines(logs.String()) {
				if strings.Contains(l, tc.want) {
					line = l
				}
			}
			if !strings.Contains(line, `"level":"`+tc.level+`"`) {
				t.Errorf("no %s line %q in the logs:\n%s", tc.level, tc.want, logs.String())
			}
		})
	}
	// A plain Redis is not asked.
	r := testredis.Start(t)
	var logs bytes.Buffer
	st, _, _, err := openStore(p, r.URL(), minRedisKeySecret, slog.New(slog.NewJSONHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if strings.Contains(logs.String(), "min-replicas") || strings.Contains(logs.String(), "SENTINEL") {
		t.Errorf("a plain Redis was checked for failover loss:\n%s", logs.String())
	}
}
