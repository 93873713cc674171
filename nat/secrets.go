package nat

import (
	"crypto/rand"
	"errors"
	"fmt"
	"strings"
)

// ParseSecrets parses the value of the `visitor { secret_env }` variable: a
// comma-separated list of secrets, the first of which signs while all verify.
// Spaces around each secret are trimmed; a secret is otherwise used as its
// raw bytes, so it cannot contain a comma (base64 or hex from a generator
// such as `openssl rand -base64 32` never does). An empty value, an empty
// element (",," or a trailing comma), a secret shorter than MinSecretLen
// bytes and more than MaxSecrets secrets are errors. Errors name a secret by
// its position, never by its content.
//
// An unset variable is not this function's business: the caller then uses
// RandomSecret and warns that a fleet needs a shared secret.
func ParseSecrets(s string) ([][]byte, error) {
	if strings.TrimSpace(s) == "" {
		return nil, errors.New("no visitor secrets: the value is empty")
	}
	// Not the hot path: this runs once per start or reload.
	elems := strings.Split(s, ",")
	n := len(elems)
	if n > MaxSecrets {
		return nil, fmt.Errorf("%d visitor secrets, at most %d are allowed", n, MaxSecrets)
	}
	secrets := make([][]byte, n)
	for i, elem := range elems {
		elem = strings.TrimSpace(elem)
		switch {
		case elem == "":
			return nil, fmt.Errorf("visitor secret %d of %d is empty", i+1, n)
		case len(elem) < MinSecretLen:
			return nil, fmt.Errorf("visitor secret %d of %d is %d bytes, at least %d are needed", i+1, n, len(elem), MinSecretLen)
		}
		secrets[i] = []byte(elem)
	}
	return secrets, nil
}

// RandomSecret returns 32 random bytes from crypto/rand, the secret a node
// uses when the policy's secret variable is unset. Cookies it signs verify
// only on this node and only until it restarts, so a fleet behind one load
// balancer needs a shared secret instead.
func RandomSecret() []byte {
	b := make([]byte, 32)
	// crypto/rand.Read never fails: on a broken system it crashes the
	// program rather than return predictable bytes.
	_, _ = rand.Read(b)
	return b
}
