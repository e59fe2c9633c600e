#!/usr/bin/env bash
# soak.sh SECONDS: runs the fault checker for SECONDS on every backend and
# fault mix, and on the election, RunOnce, the semaphore, the read-write
# lock and LockAll, in two waves of rows that run at once; prints each
# report, the safety table and the seeds, and exits 1 when a run broke a
# property every safe run keeps.
# The rows of faults a backend is not safe against (a server restarted
# empty at once, a Sentinel failover without a replica's acknowledgement)
# run too, for their price, and do not fail the soak. go test runs one
# short run of each backend and primitive; these are the long mixes.
# A failing run leaves its artifacts (report, history, porcupine's
# visualisation) under $DLOCK_FAULTS_ARTIFACTS, or the temporary
# directory, and its report says where.
set -u
seconds=${1:-600}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
cd "$(dirname "$0")" && go build -o "$dir/faultcheck" ./cmd/faultcheck && go build -o "$dir/dlock" github.com/dlock-go/dlock/cmd/dlock || exit 2

run() { # NAME FLAGS...: a row that must keep every property of a safe run
	local name=$1; shift
	"$dir/faultcheck" -seconds "$seconds" -table "$@" >"$dir/$name.out" 2>&1
	echo $? >"$dir/$name.code"
}
price() { # NAME FLAGS...: a row under a fault the backend is not safe against: its figures are the price
	local name=$1; shift
	"$dir/faultcheck" -seconds "$seconds" -table "$@" >"$dir/$name.out" 2>&1
	echo $? >"$dir/$name.price"
}
holders=pause-holder,kill-holder,cut-holder,slow-holder
replies=lose-reply,repeat-command
etcd=stop-member,isolate-leader,partition-members
redlock=pause-server,kill-server,cut-majority
cluster=pause-holder,kill-holder,cluster-failover,migrate-slot
run 01-redis -backend redis -faults $holders,pause-server,kill-server,$replies &
run 02-redis-cli -backend redis -dlock "$dir/dlock" -faults $holders,$replies &
run 03-redis-election -backend redis -primitive election -workers 3 -faults $holders,pause-server,$replies &
run 04-redis-runonce -backend redis -primitive runonce -faults $holders,pause-server,kill-server,$replies &
run 05-redis-semaphore -backend redis -primitive semaphore -limit 3 -workers 5 -faults $holders,pause-server,$replies &
run 06-redis-rwlock -backend redis -primitive rwlock -workers 5 -faults $holders,pause-server,$replies &
run 07-redis-multi -backend redis -primitive multi -workers 5 -faults $holders,pause-server,$replies &
run 08-sentinel -backend sentinel -faults pause-holder,kill-holder,failover,kill-master &
run 09-cluster -backend cluster -faults $cluster &
run 10-cluster-election -backend cluster -primitive election -workers 3 -faults $cluster &
run 11-redlock -backend redlock -faults $holders,$redlock,$replies &
run 12-redlock-election -backend redlock -primitive election -workers 3 -faults $holders,$redlock,$replies &
run 13-redlock-runonce -backend redlock -primitive runonce -faults $holders,$redlock,$replies &
# Two waves of about fourteen rows, each row for the whole SECONDS: all
# 28 at once drove a 2-core machine's load past 300, where new processes
# take many seconds to start.
wait
run 14-etcd -backend etcd -members 3 -ttl 2s -faults $holders,$etcd &
run 15-etcd-election -backend etcd -members 3 -ttl 2s -primitive election -workers 3 -faults $holders,$etcd &
run 16-etcd-runonce -backend etcd -members 3 -ttl 2s -primitive runonce -faults $holders,$etcd &
run 17-etcd-semaphore -backend etcd -members 3 -ttl 2s -primitive semaphore -limit 3 -workers 5 -faults $holders,$etcd &
run 18-etcd-rwlock -backend etcd -members 3 -ttl 2s -primitive rwlock -workers 5 -faults $holders,$etcd &
run 19-etcd-multi -backend etcd -members 3 -ttl 2s -primitive multi -workers 5 -faults $holders,$etcd &
pg=$holders,pause-server,kill-server,lose-reply
run 20-postgres -backend postgres -faults $pg &
run 21-postgres-election -backend postgres -primitive election -workers 3 -faults $pg &
run 22-postgres-runonce -backend postgres -primitive runonce -faults $pg &
run 23-postgres-semaphore -backend postgres -primitive semaphore -limit 3 -workers 5 -faults $pg &
run 24-postgres-rwlock -backend postgres -primitive rwlock -workers 5 -faults $pg &
run 25-postgres-multi -backend postgres -primitive multi -workers 5 -faults $pg &
price 26-redis-empty -backend redis -faults restart-server &
price 27-redlock-empty -backend redlock -faults restart-server &
price 28-sentinel-noack -backend sentinel -no-ack -faults failover,kill-master &
wait

fail=0
for f in "$dir"/*.out; do cat "$f"; echo; done
echo "| backend | faults | holds | overlaps | (a) unsafe | (b) fenced | (c) regressions | (d) stuck | (e) late loss | linearizable |"
echo "|---|---|---|---|---|---|---|---|---|---|"
for f in "$dir"/*.out; do
	row=$(grep -h '^| ' "$f")
	# The rows of faults a backend is not safe against say so.
	[ -e "${f%.out}.price" ] && row=$(echo "$row" | sed -E 's/^\| ([^|]*) \| ([^|]*) \|/| \1 | \2 (not safe) |/')
	echo "$row"
done
echo
echo "seeds, in row order:" $(grep -ho 'seed [0-9]*:' "$dir"/*.out | tr -d ':' | cut -d' ' -f2)
for c in "$dir"/*.code; do [ "$(cat "$c")" = 0 ] || fail=1; done
exit $fail
