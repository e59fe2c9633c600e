package main

import "encoding/json"

// detail returns the "detail" member of an RFC 9457 problem object, or the
// raw body when it is not one.
func detail(body []byte) string {
	var p struct {
		Detail string `json:"detail"`
	}
	if err := json.Unmarshal(body, &p); err != nil || p.Detail == "" {
		return string(body)
	}
	return p.Detail
}
