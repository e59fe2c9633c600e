package redisnode

import "fmt"

// RenewCodes reads the reply of RenewLua for n locks: one byte per lock,
// '1' renewed, '0' no longer ours.
func RenewCodes(reply string, err error, n int) (string, error) {
	if err != nil {
		return "", err
	}
	if len(reply) != n+1 || reply[0] != 'r' {
		return "", fmt.Errorf("renew.lua answered %q for %d locks", reply, n)
	}
	return reply[1:], nil
}
