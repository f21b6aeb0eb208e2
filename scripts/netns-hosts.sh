#!/usr/bin/env bash
# Several "hosts" on one machine for multi-host runs of `eth launch` (docs/runtime.md, Multi-host
# runs): each host is a network namespace with its own IP, joined to the others by a veth pair
# to a bridge in the root namespace (which also gets an address, so an mpirun started here reaches
# every host). Links are shaped with tc tbf to a bandwidth: each host's NIC sends and receives at
# most that rate, as a full-duplex link of a real cluster. Needs root (ip netns, tc).
#
#   netns-hosts.sh up N [--rate-mbit R] [--hostfile FILE]     N hosts, links at R Mbit/s
#   netns-hosts.sh up [N] --cluster FILE [--scale S] [...]    one host per node of the cluster
#                                      file, each link at its node's inter-node figure times S
#   netns-hosts.sh shape (--rate-mbit R | --cluster FILE [--scale S])   reshape the running hosts
#   netns-hosts.sh kill HOST           end every process of one host (a host that dies)
#   netns-hosts.sh down                remove the hosts, their processes and the bridge
#   netns-hosts.sh status
#
# Hosts are named <prefix>0..<prefix>N-1 (prefix $ETH_NETNS_PREFIX, default eth-h), host k at
# $ETH_NETNS_NET.(k+1) (default 10.231.0), the bridge at .254. `up` first removes what an earlier
# (perhaps failed) run left, and removes what it built if it fails itself; `down` is idempotent.
# mpirun starts processes on a host through scripts/netns-agent (OMPI_MCA_plm_rsh_agent).
# Only one set of hosts per prefix exists at a time: callers that may run concurrently serialize
# on a lock (the tests flock /run/lock/eth-netns-<prefix>.lock).
set -euo pipefail

prefix=${ETH_NETNS_PREFIX:-eth-h}
net=${ETH_NETNS_NET:-10.231.0}
bridge=${prefix}br

die() { echo "netns-hosts: $*" >&2; exit 2; }

hosts() { ip netns list | awk '{print $1}' | grep -E "^${prefix}[0-9]+\$" | sort -V || true; }

down() {
  local h pids
  for h in $(hosts); do
    # Processes still running in the namespace (daemons and ranks of a run that failed).
    pids=$(ip netns pids "$h" 2>/dev/null || true)
    [[ -n $pids ]] && kill -9 $pids 2>/dev/null || true
    ip link del "${h}-br" 2>/dev/null || true
    ip netns del "$h" 2>/dev/null || true
  done
  # veth ends whose namespace is already gone.
  for h in $(ip -o link show | awk -F': ' '{print $2}' | sed 's/@.*//' |
             grep -E "^${prefix}[0-9]+-br\$" || true); do
    ip link del "$h" 2>/dev/null || true
  done
  ip link del "$bridge" 2>/dev/null || true
}

# Per host k (0-based), the link rate in Mbit/s from --rate-mbit or the cluster file.
rate_of() {
  local k=$1
  if [[ -n $rate ]]; then
    echo "$rate"
  elif [[ -z $cluster ]]; then
    echo 0  # unshaped
  else
    jq -r --argjson k "$k" --argjson s "$scale" '
      (.inter_node_bandwidth_gbps // 200) as $c
      | .nodes[$k].device_type as $t
      | ((.device_types // {})[$t].inter_node_bandwidth_gbps // $c)
      | if type == "number" then . * 1000 * $s else "not a number" end' "$cluster"
  fi
}

# tbf on one interface: the rate, a bucket of 0.1 ms at that rate but at least 16 KiB (a few
# full frames), and up to 100 ms of queue. A larger bucket lets a message of that size through at
# the veth's own speed: with 1 ms at 1 Gbit/s a 128 KiB transfer took 0.16 ms instead of 1.05.
tbf() {
  local ns=$1 dev=$2 mbit=$3
  local burst
  burst=$(awk -v r="$mbit" 'BEGIN { b = r * 1e6 / 8 / 1e4; if (b < 16384) b = 16384; printf "%d", b }')
  local cmd=(tc qdisc replace dev "$dev" root tbf rate "${mbit}mbit" burst "$burst" latency 100ms)
  if [[ -n $ns ]]; then ip netns exec "$ns" "${cmd[@]}"; else "${cmd[@]}"; fi
}

shape() {
  local k=0 h r
  for h in $(hosts); do
    r=$(rate_of "$k")
    [[ $r =~ ^[0-9.]+$ ]] || die "no inter-node figure for node $k in $cluster (got \"$r\")"
    if [[ $r == 0 ]]; then
      ip netns exec "$h" tc qdisc del dev "$h" root 2>/dev/null || true
      tc qdisc del dev "${h}-br" root 2>/dev/null || true
    else
      tbf "$h" "$h" "$r"         # what the host sends
      tbf "" "${h}-br" "$r"      # what it receives
    fi
    echo "host $h: link ${r} Mbit/s each way"
    k=$((k + 1))
  done
}

up() {
  local n=$1
  ((n >= 1 && n <= 250)) || die "expected 1..250 hosts, got $n"
  down
  # Whatever ends `up` early (a failed command, die) removes what it made.
  trap 'if (($? != 0)); then echo "netns-hosts: up failed; removing what it made" >&2; down; fi' EXIT
  ip link add "$bridge" type bridge
  ip addr add "${net}.254/24" dev "$bridge"
  ip link set "$bridge" up
  local k h
  for ((k = 0; k < n; ++k)); do
    h=${prefix}${k}
    ip netns add "$h"
    ip link add "$h" type veth peer name "${h}-br"
    ip link set "$h" netns "$h"
    ip link set "${h}-br" master "$bridge"
    ip link set "${h}-br" up
    ip netns exec "$h" ip link set lo up
    ip netns exec "$h" ip addr add "${net}.$((k + 1))/24" dev "$h"
    ip netns exec "$h" ip link set "$h" up
    # MPI traffic comes in bursts after idle gaps (pipeline bubbles); Linux would restart TCP
    # slow start after each, charging a message several round trips no cost model (or RDMA
    # network) has. HPC hosts usually turn it off.
    ip netns exec "$h" sysctl -qw net.ipv4.tcp_slow_start_after_idle=0
  done
  shape
  if [[ -n $hostfile ]]; then
    : >"$hostfile"
    for ((k = 0; k < n; ++k)); do echo "${prefix}${k}" >>"$hostfile"; done
  fi
  trap - EXIT
  echo "up: $n hosts ${prefix}0..${prefix}$((n - 1)) on ${net}.0/24 (bridge $bridge at ${net}.254)"
}

[[ $(id -u) -eq 0 ]] || die "needs root (ip netns, tc)"
command -v ip >/dev/null && command -v tc >/dev/null || die "needs ip and tc (Debian iproute2)"

action=${1:-}
shift || true
count=""
rate=""
cluster=""
scale=1
hostfile=""
host=""
while (($#)); do
  case $1 in
    --rate-mbit) rate=$2; shift 2 ;;
    --cluster) cluster=$2; shift 2 ;;
    --scale) scale=$2; shift 2 ;;
    --hostfile) hostfile=$2; shift 2 ;;
    [0-9]*) count=$1; shift ;;
    *) if [[ $action == kill && -z $host ]]; then host=$1; shift; else die "unknown argument $1"; fi ;;
  esac
done
if [[ -n $cluster ]]; then
  command -v jq >/dev/null || die "--cluster needs jq"
  [[ -r $cluster ]] || die "cannot read cluster file $cluster"
  [[ -z $count ]] && count=$(jq '.nodes | length' "$cluster")
  [[ -z $rate ]] || die "give --rate-mbit or --cluster, not both"
fi

case $action in
  up)
    [[ -n $count ]] || die "usage: netns-hosts.sh up N [--rate-mbit R] (or --cluster FILE)"
    up "$count" ;;
  shape)
    [[ -n $rate || -n $cluster ]] || die "usage: netns-hosts.sh shape --rate-mbit R"
    shape ;;
  kill)
    [[ -n $host ]] && ip netns list | grep -qw "^$host" || die "no host \"$host\""
    pids=$(ip netns pids "$host")
    [[ -n $pids ]] && kill -9 $pids || true ;;
  down) down ;;
  status)
    for h in $(hosts); do
      echo "$h $(ip netns exec "$h" ip -4 -o addr show dev "$h" | awk '{print $4}')" \
        "$(ip netns exec "$h" tc qdisc show dev "$h" | head -1)"
    done ;;
  *) die "usage: netns-hosts.sh up|shape|kill|down|status (see the comment at its top)" ;;
esac
