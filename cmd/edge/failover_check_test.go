package main

import (
	"strings"
	"testing"

	"github.com/edge-gateway/edge/internal/testredis"
)

// TestSentinelFailoverLossChecked: a node on a Sentinel-managed master
// reads its min-replicas-to-write at start and warns when it is 0 (a
// failover then forgets the counts the old master takes after its
// replica's promotion), and says it is fine when the master refuses writes
// without a replica. Against a real primary, replica and sentinel.
func TestSentinelFailoverLossChecked(t *testing.T) {
	p := redisCheckPolicy(t)
	for _, tc := range []struct {
		name  string
		args  []string
		want  string
		level string
	}{
		{"min-replicas 0", nil, "A SENTINEL FAILOVER FORGETS COUNTERS", "ERROR"},
		{"min-replicas 1", []string{"--min-replicas-to-write", "1", "--min-replicas-max-lag", "10"}, "sentinel master refuses writes without a replica", "INFO"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := testredis.StartSentinel(t, testredis.SentinelOptions{PrimaryArgs: tc.args})
			logs := openStoreLogs(t, p, s.URL())
			if line := lastLine(logs, tc.want); !strings.Contains(line, `"level":"`+tc.level+`"`) {
				t.Errorf("no %s line %q in the logs:\n%s", tc.level, tc.want, logs)
			}
		})
	}
	// A plain Redis is not asked.
	logs := openStoreLogs(t, p, testredis.Start(t).URL())
	if strings.Contains(logs, "min-replicas") || strings.Contains(logs, "SENTINEL") {
		t.Errorf("a plain Redis was checked for failover loss:\n%s", logs)
	}
}
