package settings

import (
	"crypto/rand"
	"encoding/base64"
)

// NewToken returns 128 random bits from crypto/rand, as 22 characters of
// unpadded URL-safe base64.
func NewToken() string {
	var b [16]byte
	rand.Read(b[:]) // never fails (crypto/rand documents it)
	var s [22]byte
	base64.RawURLEncoding.Encode(s[:], b[:])
	return string(s[:])
}
