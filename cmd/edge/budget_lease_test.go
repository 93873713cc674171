package main

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/edge-gateway/edge/internal/testredis"
)

// Budget leases through the real server (docs/policy.md, "Budget
// leases"; issue 27, goal 4): 1, 2 and 4 `edge serve` processes on one
// redis-server. A hot global rule with budget_lease { units = 50 } costs
// Redis at most 0.1 script calls a request (a rule without one costs a
// call a request, which shows the count counts), and a scarce global rule
// with budget_lease { units = 20 } admits no more than its limit across
// the nodes, and no less than the limit minus what the error bound lets a
// node lose (nodes × units, units held past their hold).

// budgetLeasePolicy is the policy every node of the test runs.
func budgetLeasePolicy(listen, admin, upstream, url string) string {
	return fmt.Sprintf(`edge {
  listen         = %q
  admin_listen   = %q
  upstream       = "http://%s"
  key_secret_env = "EDGE_BUDGET_LEASE_SECRET"
}

store "redis" {
  url     = %q
  timeout = "1s"
}

rule "hot" {
  paths  = ["/hot"]
  key    = ["global"]
  limit  = 1000000
  period = "1h"
  budget_lease {
    units = 50
  }
}

rule "scarce" {
  paths  = ["/scarce"]
  key    = ["global"]
  limit  = %d
  period = "24h"
  budget_lease {
    units = %d
  }
}

rule "unleased" {
  paths  = ["/unleased"]
  key    = ["global"]
  limit  = 1000000
  period = "1h"
}
`, listen, admin, upstream, url, scarceLimit, scarceUnits)
}

const (
	// scarceLimit per 24h refills a unit every 432s: none during the test.
	scarceLimit = 200
	scarceUnits = 20
)

func TestBudgetLeasesAcrossNodes(t *testing.T) {
	if testing.Short() {
		t.Skip("starts up to 4 edge processes")
	}
	t.Setenv("EDGE_BUDGET_LEASE_SECRET", strings.Repeat("b", minRedisKeySecret))
	_, origin := startDemoOrigin(t)

	for _, nodes := range []int{1, 2, 4} {
		t.Run(fmt.Sprintf("%d nodes", nodes), func(t *testing.T) {
			redis := testredis.Start(t) // its own: INFO commandstats counts this fleet's calls alone
			fleet := make([]*leaseNode, nodes)
			for i := range fleet {
				fleet[i] = startReadyNode(t, func(listen, admin string) string {
					return budgetLeasePolicy(listen, admin, origin, redis.URL())
				})
			}
			client := &http.Client{Timeout: hangGuard}
			// send sends n GETs of path, spread over the nodes in turn,
			// and returns how many were admitted (not 429) and the
			// script calls Redis ran for them.
			send := func(path string, n int) (admitted, calls int) {
				t.Helper()
				before, err := redis.CommandCalls("evalsha")
				if err != nil {
					t.Fatal(err)
				}
				for i := range n {
					resp, err := client.Get("http://" + fleet[i%nodes].listen + path)
					if err != nil {
						t.Fatalf("GET %s through node %d: %v", path, i%nodes, err)
					}
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode != http.StatusTooManyRequests {
						admitted++
					}
				}
				after, err := redis.CommandCalls("evalsha")
				if err != nil {
					t.Fatal(err)
				}
				return admitted, after - before
			}

			const n = 1000
			if admitted, calls := send("/unleased", 200); admitted != 200 || calls < 200 {
				t.Fatalf("unleased: %d of 200 admitted in %d script calls, want all in at least 200: the count does not count", admitted, calls)
			}
			admitted, calls := send("/hot", n)
			perRequest := float64(calls) / n
			t.Logf("%d nodes: hot global key, %d requests, %d script calls: %.3f a request", nodes, n, calls, perRequest)
			if admitted != n || perRequest > 0.1 {
				t.Errorf("hot: %d of %d admitted, %.3f script calls a request; want all, at most 0.1", admitted, n, perRequest)
			}

			admitted, calls = send("/scarce", 3*scarceLimit)
			t.Logf("%d nodes: scarce global key, limit %d: %d admitted of %d in %d script calls", nodes, scarceLimit, admitted, 3*scarceLimit, calls)
			if admitted > scarceLimit || admitted < scarceLimit-nodes*scarceUnits {
				t.Errorf("scarce: %d admitted, want between %d (the limit less nodes × units) and the limit %d", admitted, scarceLimit-nodes*scarceUnits, scarceLimit)
			}
		})
	}
}
