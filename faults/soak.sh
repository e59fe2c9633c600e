#!/usr/bin/env bash
# soak.sh SECONDS: runs the fault checker for SECONDS on every backend and
# fault mix, and on the semaphore, the read-write lock, LockAll and the
# election, all at once; prints each report and the safety table, and
# exits 1 when a run broke a property every safe run keeps. go test runs
# one short run of each backend and primitive; these are the long mixes.
# A failing run leaves its artifacts (report, history, porcupine's
# visualisation) under $DLOCK_FAULTS_ARTIFACTS, or the temporary
# directory, and its report says where.
set -u
seconds=${1:-600}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
cd "$(dirname "$0")" && go build -o "$dir/faultcheck" ./cmd/faultcheck && go build -o "$dir/dlock" github.com/dlock-go/dlock/cmd/dlock || exit 2

run() { # NAME FLAGS...
	local name=$1; shift
	"$dir/faultcheck" -seconds "$seconds" -table "$@" >"$dir/$name.out" 2>&1
	echo $? >"$dir/$name.code"
}
holders=pause-holder,kill-holder,cut-holder,slow-holder
replies=lose-reply,repeat-command
etcd=stop-member,isolate-leader,partition-members
run 01-redis -backend redis -faults $holders,pause-server,$replies &
run 02-etcd -backend etcd -members 3 -ttl 2s -faults $holders,$etcd &
run 03-redis-cli -backend redis -dlock "$dir/dlock" -faults $holders,$replies &
run 04-redis-empty -backend redis -faults restart-server &
run 05-redis-semaphore -backend redis -primitive semaphore -limit 3 -workers 5 -faults $holders,pause-server,$replies &
run 06-redis-rwlock -backend redis -primitive rwlock -workers 5 -faults $holders,pause-server,$replies &
run 07-redis-multi -backend redis -primitive multi -workers 5 -faults $holders,pause-server,$replies &
run 08-etcd-semaphore -backend etcd -members 3 -ttl 2s -primitive semaphore -limit 3 -workers 5 -faults $holders,$etcd &
run 09-etcd-rwlock -backend etcd -members 3 -ttl 2s -primitive rwlock -workers 5 -faults $holders,$etcd &
run 10-etcd-multi -backend etcd -members 3 -ttl 2s -primitive multi -workers 5 -faults $holders,$etcd &
run 11-redis-election -backend redis -primitive election -workers 3 -faults $holders,pause-server,$replies &
run 12-etcd-election -backend etcd -members 3 -ttl 2s -primitive election -workers 3 -faults $holders,$etcd &
redlock=pause-server,restart-server,kill-server,cut-majority
run 13-redlock -backend redlock -faults $holders,$redlock,$replies &
run 15-redlock-election -backend redlock -primitive election -workers 3 -faults $holders,$redlock,$replies &
run 16-redlock-runonce -backend redlock -primitive runonce -faults $holders,$redlock,$replies &
run 17-redis-runonce -backend redis -primitive runonce -faults $holders,pause-server,kill-server,$replies &
run 14-sentinel -backend sentinel -faults pause-holder,kill-holder,failover &
cluster=pause-holder,kill-holder,cluster-failover,migrate-slot
run 18-cluster -backend cluster -faults $cluster &
run 19-cluster-election -backend cluster -primitive election -workers 3 -faults $cluster &
wait

fail=0
for f in "$dir"/*.out; do cat "$f"; echo; done
echo "| backend | faults | holds | overlaps | (a) unsafe | (b) fenced | (c) regressions | (d) stuck | (e) late loss | linearizable |"
echo "|---|---|---|---|---|---|---|---|---|---|"
grep -h '^| ' "$dir"/*.out
for c in "$dir"/*.code; do [ "$(cat "$c")" = 0 ] || fail=1; done
exit $fail
