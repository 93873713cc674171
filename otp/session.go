package otp

import "encoding/binary"

// AppendSessionKey appends the otp_session characteristic to dst: the
// phone's E.164 text and the session (challenge) ID, each preceded by its
// length as a uvarint, so no two different pairs give the same bytes
// ("+1201", "5550123" and "+12015", "550123" differ). The caller hashes the
// result with the key secret; dst is returned grown as append grows it.
func AppendSessionKey(dst []byte, phoneE164, sessionID string) []byte {
	return appendSessionKey(dst, phoneE164, sessionID)
}

func appendSessionKey[T ~string | ~[]byte](dst []byte, phoneE164 string, sessionID T) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(phoneE164)))
	dst = append(dst, phoneE164...)
	dst = binary.AppendUvarint(dst, uint64(len(sessionID)))
	return append(dst, sessionID...)
}
