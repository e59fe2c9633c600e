// Package httplock is net/http middleware that runs a handler only while it
// holds a distributed lock named after the request: the
// @Lock(key = "order:{orderId}") annotation of Java frameworks, in Go's
// idiom.
//
//	lock, err := httplock.New(locker, "order:{orderId}")  // dlock options may follow: dlock.WithWait(2*time.Second)
//	if err != nil { ... }                                 // bad template or option: at startup
//	mux.Handle("POST /orders/{orderId}/pay", lock(pay))
//
// The key is the template filled from the request (see package keytmpl):
// {orderId} is r.PathValue("orderId"), {header:X-Tenant} a request header,
// {query:month} a query parameter. Values are escaped so that distinct
// values always give distinct keys. Wrap the handler you register on the
// [http.ServeMux], not the mux itself: path values exist only once the mux
// has matched the route.
//
// # What the client sees
//
//   - The lock is free: the handler runs while the middleware holds it, and
//     the lock is released when the handler returns or panics (the panic
//     then goes on to net/http).
//   - The lock is busy: 409 Conflict (or 423 Locked, with Middleware's
//     Status), at once, or after waiting up to dlock.WithWait for it. A Retry-After header
//     gives the holder's remaining lease in whole seconds, rounded up, at
//     least 1. The body is an RFC 9457 application/problem+json object with
//     the extension members "lockKeyTemplate" and "retryAfter".
//   - A placeholder's value is empty (a missing header or query parameter,
//     an empty {rest...} wildcard) or the key is too long: 400 Bad Request.
//   - The Locker fails (Redis down or paused, a timeout): 503 Service
//     Unavailable, whose body says only that the lock service is
//     unavailable. The error itself goes to Middleware's Logger.
//   - The template names a path wildcard that the route does not declare:
//     500 Internal Server Error, since the server is set up wrong.
//
// The busy answer names the key template ("order:{orderId}"), not the key
// ("order:42"). The key is made of request values, and a template may take
// them from headers or query parameters that are private (a tenant, an
// account, an e-mail address); echoing them back into a response that
// proxies and logs keep would leak them, and tells the client nothing it
// did not send. The template is part of the API, like the route.
//
// # Inside the handler
//
// Each request acquires with an owner id of its own ([dlock.ContextWithOwner] with
// a fresh random id) unless its context already carries one, so two
// requests of one process contend like two processes do, and a waiting
// request waits for the other instead of failing. A context that carries an
// owner (set by an earlier middleware from a request id, say) makes the
// lock reentrant for that owner: requests with the same owner do not
// exclude each other.
//
// The handler gets the held lock from [dlock.LockFrom]: its Fence is the
// fencing token to hand to storage that can refuse stale writers (give the
// Locker dlock.WithFencing(true) for Redis to hand out fences). The
// request's context is cancelled the moment the hold ends before the
// handler returns: the lock was lost (its lease ran out while the server
// was paused, say; [context.Cause] matches dlock.ErrLockLost) or the
// Locker was closed (dlock.ErrClosed). A handler that watches its context
// stops working on data it no longer guards. The lock's lease is the
// Locker's TTL (or dlock.WithTTL given to New), renewed by the Locker's
// watchdog while the handler runs.
//
// # Example: paying an order once
//
// examples/orders is an order-payment service. It serves
//
//	POST /orders/{orderId}/pay
//
// behind httplock.New(locker, "order:{orderId}"), so at most one payment of
// an order runs at a time across every replica that shares the Redis.
// Started without flags, it starts its own redis-server, sends two
// concurrent payments of order 42 and prints what they got:
//
//	$ go run ./examples/orders
//	POST /orders/42/pay: 200 OK: paid order 42 (fence 1795488280554482)
//	POST /orders/42/pay: 409 Conflict (Retry-After: 10): another request holds the lock on this resource; retry later
//
// With -listen 127.0.0.1:8080 -redis 127.0.0.1:6379 it serves until
// interrupted instead, and two quick curl -X POST calls show the same pair.
package httplock
