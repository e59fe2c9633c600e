package redisnode

import _ "embed"

// The Lua that both Redis drivers run on a node, each prepending or
// appending its own part (see each file's opening comment).
var (
	// BaseLua defines now_ms, busy_reply and leave_queue, which LockLua
	// and SharedLua need; it follows the driver's fence counter.
	//go:embed base.lua
	BaseLua string
	// LockLua is the layout of a lock on one node and the rules of its
	// queue: tell_observers, enqueue, live_head and grant. It follows
	// BaseLua.
	//go:embed lock.lua
	LockLua string
	// ForceLua deletes a lock whoever holds it; it follows LockLua.
	//go:embed force.lua
	ForceLua string
	// LeaseLua defines is_ours, refresh_hold and refresh: a lock's or a
	// hold's lease.
	//go:embed lease.lua
	LeaseLua string
	// RenewLua renews a batch of locks and holds of one node in one
	// call; it follows LeaseLua, and RenewCodes reads its reply.
	//go:embed renew.lua
	RenewLua string
	// SharedLua is the layout and the rules of the holds of semaphores
	// and read-write locks: purge, keep, census, fits, take, grant and
	// their helpers. It follows BaseLua.
	//go:embed shared.lua
	SharedLua string
	// DowngradeLua turns a write hold into a read hold; it follows
	// SharedLua.
	//go:embed downgrade.lua
	DowngradeLua string
	// SharedTTLLua reads the remaining lease of a hold; it stands alone.
	//go:embed shared_ttl.lua
	SharedTTLLua string
)
