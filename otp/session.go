package otp

import "encoding/binary"

// AppendSessionKey appends the otp_session characteristic to dst: the
// session (challenge) ID alone, preceded by its length as a uvarint. It is
// the challenge ID alone, not the phone with it: an origin that finds a
// challenge by its ID (and checks the phone it stored, or none) would give
// a fresh budget of guesses per phone number written beside the ID
// (docs/policy.md, "otp_session"). The otp_session characteristic passes
// the ID normalised as an account is (login.Normalizer: "AbC123" and
// "abc123" are one challenge to a case-insensitive column). The caller
// hashes the result with the key secret; dst is returned grown as append
// grows it.
func AppendSessionKey(dst []byte, sessionID string) []byte {
	return appendSessionKey(dst, sessionID)
}

func appendSessionKey[T ~string | ~[]byte](dst []byte, sessionID T) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(sessionID)))
	return append(dst, sessionID...)
}
