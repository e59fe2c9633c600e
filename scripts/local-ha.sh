#!/usr/bin/env bash
# local-ha.sh starts a highly available Redis topology on this machine's
# loopback, to try dlock against: redis-server processes on free ports, in
# a temporary directory. It prints the --redis URL to give dlock, then
# waits; Ctrl-C, or `local-ha.sh stop` from another terminal, stops every
# process it started and removes the directory.
#
#   local-ha.sh sentinel [--acl]   a master, a replica and 3 Sentinels
#   local-ha.sh cluster  [--acl]   a Cluster of 3 masters, each with a replica
#   local-ha.sh redlock  [--acl]   3 independent servers (REDLOCK_NODES=5 for 5)
#   local-ha.sh stop               stop what a running local-ha.sh started
#
# --acl creates, on every data node, the application's user of
# docs/least-privilege.md (dlock-app), and prints a URL that logs in as it.
# Needs redis-server and redis-cli (Debian: apt-get install redis-server).
set -euo pipefail

STATE="${TMPDIR:-/tmp}/dlock-local-ha.state" # "PID DIR" of the running script
HERE="$(cd "$(dirname "$0")" && pwd)"
DIR=""
PIDS=()

usage() {
	sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//' >&2
	exit 2
}

die() {
	echo "local-ha: $*" >&2
	exit 1
}

# stop_all stops the servers this script started, by their process ids,
# and removes its directory.
stop_all() {
	trap - INT TERM EXIT
	if ((${#PIDS[@]})); then
		kill "${PIDS[@]}" 2>/dev/null || true
		wait "${PIDS[@]}" 2>/dev/null || true
	fi
	[[ -n "$DIR" ]] && rm -rf "$DIR"
	if [[ -f "$STATE" && "$(cut -d' ' -f1 "$STATE")" == "$$" ]]; then
		rm -f "$STATE"
	fi
}

# cmd_stop asks a running local-ha.sh to stop what it started, and waits
# until it has.
cmd_stop() {
	[[ -f "$STATE" ]] || die "nothing to stop (no $STATE)"
	local pid
	read -r pid _ <"$STATE"
	if ! kill -0 "$pid" 2>/dev/null; then
		rm -f "$STATE"
		die "the local-ha.sh that wrote $STATE (pid $pid) is gone"
	fi
	kill -TERM "$pid"
	for _ in $(seq 100); do
		kill -0 "$pid" 2>/dev/null || { echo "stopped"; return; }
		sleep 0.1
	done
	die "pid $pid did not stop within 10s"
}

# port_free reports whether nothing listens on 127.0.0.1:$1.
port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# free_port prints a port on which nothing listens now.
free_port() {
	local p
	for _ in $(seq 100); do
		p=$((20000 + RANDOM % 30000))
		if port_free "$p"; then
			echo "$p"
			return
		fi
	done
	die "found no free port"
}

# start_server NAME [CONFIG LINES...] starts a redis-server named NAME with
# its own directory and a free port, waits until it answers PING, and sets
# PORT to the port. A port taken between the probe and the bind is retried.
start_server() {
	local name=$1 port try
	shift
	mkdir -p "$DIR/$name"
	for try in 1 2 3 4 5; do
		port=$(free_port)
		{
			echo "bind 127.0.0.1"
			echo "port $port"
			echo "dir $DIR/$name"
			echo "logfile $DIR/$name/redis.log"
			echo "daemonize no"
			printf '%s\n' "$@"
		} >"$DIR/$name/redis.conf"
		if [[ "$name" == sentinel* ]]; then
			redis-server "$DIR/$name/redis.conf" --sentinel >/dev/null 2>&1 &
		else
			redis-server "$DIR/$name/redis.conf" >/dev/null 2>&1 &
		fi
		PIDS+=("$!")
		for _ in $(seq 100); do
			if redis-cli -p "$port" ping >/dev/null 2>&1; then
				PORT=$port
				return
			fi
			kill -0 "$!" 2>/dev/null || break
			sleep 0.05
		done
		kill "$!" 2>/dev/null || true
		wait "$!" 2>/dev/null || true
		unset 'PIDS[-1]'
	done
	die "$name did not start; see $DIR/$name/redis.log"
}

# A data node: no persistence, and a quick failure detection in a Cluster.
DATA=('save ""' "appendonly no")

# acl_user creates the application's user of docs/least-privilege.md on
# the servers on the given ports, with the password $PASSWORD.
acl_user() {
	local rules port
	rules=$(grep -m1 '^ACL SETUSER dlock-app on >PASSWORD ' "$HERE/../docs/least-privilege.md") ||
		die "no ACL line for dlock-app in docs/least-privilege.md"
	rules=${rules#ACL SETUSER dlock-app on >PASSWORD }
	for port in "$@"; do
		# shellcheck disable=SC2086 # the rules are words
		redis-cli -p "$port" acl setuser dlock-app reset on ">$PASSWORD" $rules >/dev/null
		# Redis 7.2 and later: go-redis names itself when it connects.
		if [[ "$(redis-cli -p "$port" command info client\|setinfo)" != "" ]]; then
			redis-cli -p "$port" acl setuser dlock-app +client\|setinfo >/dev/null
		fi
	done
}

start_sentinel() {
	local master replica s1 s2 s3 quorum=2 sentinel=()
	start_server master "${DATA[@]}"
	master=$PORT
	start_server replica "${DATA[@]}" "replicaof 127.0.0.1 $master"
	replica=$PORT
	((ACL)) && acl_user "$master" "$replica"
	sentinel=("sentinel monitor dlock 127.0.0.1 $master $quorum"
		"sentinel down-after-milliseconds dlock 1000"
		"sentinel failover-timeout dlock 5000")
	start_server sentinel1 "${sentinel[@]}"
	s1=$PORT
	start_server sentinel2 "${sentinel[@]}"
	s2=$PORT
	start_server sentinel3 "${sentinel[@]}"
	s3=$PORT
	local login=""
	((ACL)) && login="&username=dlock-app&password=$PASSWORD"
	URL="redis+sentinel://127.0.0.1:$s1?master_name=dlock&addr=127.0.0.1:$s2&addr=127.0.0.1:$s3$login"
	NODES="master 127.0.0.1:$master, replica 127.0.0.1:$replica, sentinels 127.0.0.1:$s1 $s2 $s3"
	TRY="redis-cli -p $s1 sentinel failover dlock   # fail over; dlock follows the new master"
}

start_cluster() {
	local i ports=() addrs=() cluster=("cluster-enabled yes" "cluster-node-timeout 1000")
	for i in 1 2 3 4 5 6; do
		start_server "node$i" "${DATA[@]}" "${cluster[@]}" "cluster-config-file $DIR/node$i/nodes.conf"
		ports+=("$PORT")
		addrs+=("127.0.0.1:${ports[-1]}")
	done
	redis-cli --cluster create "${addrs[@]}" --cluster-replicas 1 --cluster-yes >"$DIR/create.log" 2>&1 ||
		die "redis-cli --cluster create failed: $(tail -3 "$DIR/create.log")"
	for _ in $(seq 200); do
		[[ "$(redis-cli -p "${ports[0]}" cluster info | tr -d '\r' | grep cluster_state)" == "cluster_state:ok" ]] && break
		sleep 0.05
	done
	((ACL)) && acl_user "${ports[@]}"
	local login=""
	((ACL)) && login="dlock-app:$PASSWORD@"
	URL="redis+cluster://${login}${addrs[0]}?addr=${addrs[1]}&addr=${addrs[2]}"
	NODES="${addrs[*]} (3 masters, 3 replicas)"
	TRY="redis-cli -p ${ports[0]} cluster nodes   # the roles; redis-cli -p PORT of a replica cluster failover, to fail over"
}

start_redlock() {
	local i n=${REDLOCK_NODES:-3} ports=() hosts=()
	((n >= 3)) || die "REDLOCK_NODES=$n: Redlock needs at least 3 servers"
	for ((i = 1; i <= n; i++)); do
		start_server "node$i" "${DATA[@]}"
		ports+=("$PORT")
		hosts+=("127.0.0.1:${ports[-1]}")
	done
	((ACL)) && acl_user "${ports[@]}"
	local login="" IFS=,
	((ACL)) && login="dlock-app:$PASSWORD@"
	URL="redis+redlock://${login}${hosts[*]}"
	IFS=' '
	NODES="${hosts[*]} (independent)"
	TRY="kill -STOP <pid of one redis-server>   # a minority down: locks still work"
}

main() {
	[[ $# -ge 1 ]] || usage
	local topology=$1
	shift
	[[ "$topology" == stop ]] && {
		cmd_stop
		return
	}
	[[ "$topology" =~ ^(sentinel|cluster|redlock)$ ]] || usage
	ACL=0
	for a in "$@"; do
		case "$a" in
		--acl) ACL=1 ;;
		*) usage ;;
		esac
	done
	command -v redis-server >/dev/null && command -v redis-cli >/dev/null ||
		die "redis-server and redis-cli are needed (Debian: apt-get install redis-server)"
	if [[ -f "$STATE" ]]; then
		read -r pid _ <"$STATE"
		kill -0 "$pid" 2>/dev/null && die "already running (pid $pid): $0 stop first"
		rm -f "$STATE"
	fi
	DIR=$(mktemp -d "${TMPDIR:-/tmp}/dlock-local-ha.XXXXXX")
	echo "$$ $DIR" >"$STATE"
	trap stop_all EXIT
	trap 'exit 130' INT
	trap 'exit 143' TERM
	PASSWORD="pw-$RANDOM$RANDOM"
	"start_$topology"
	cat <<EOF
$topology on loopback: $NODES
files: $DIR

  --redis '$URL'

for example:
  dlock run --redis '$URL' job -- sleep 5
  dlock ls --redis '$URL'
  $TRY

Ctrl-C, or $0 stop, stops it all.
EOF
	# Wait for a signal; a server that dies on its own is reported once.
	local p gone=" "
	while true; do
		for p in "${PIDS[@]}"; do
			if [[ "$gone" != *" $p "* ]] && ! kill -0 "$p" 2>/dev/null; then
				echo "local-ha: redis-server pid $p exited (see $DIR/*/redis.log)" >&2
				gone+="$p "
			fi
		done
		sleep 1 &
		wait $! || true
	done
}

main "$@"
