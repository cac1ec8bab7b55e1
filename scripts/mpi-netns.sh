#!/usr/bin/env bash
# Runs an MPI job across N "hosts" on this one machine: each host is a Linux network namespace
# with its own interface on a private bridge, its own address and its own hostname, so OpenMPI
# sees N machines and its ranks talk over TCP as they would across a real network.
#
#   scripts/mpi-netns.sh [--hosts=N] [--slots=S] [--timeout=SECONDS] -- [MPIRUN_OPTIONS] PROGRAM [ARGS]
#   scripts/mpi-netns.sh --check          # exit 0 if namespaces can be made here, else 77 and why
#
# Everything after `--` goes to mpirun after this script's own options, which are
#   --allow-run-as-root --mca plm_rsh_agent scripts/mpi-rsh-netns.sh
#   --mca oob_tcp_if_include SUBNET --mca btl_tcp_if_include SUBNET --mca btl tcp,self
#   --host H1:S,H2:S,...
# (without -np, mpirun starts N*S ranks). Example, 2 hosts with one rank and one thread each:
#   scripts/mpi-netns.sh --hosts=2 -- -x OMP_NUM_THREADS=1 build/bertbench pretrain ... --threads=1
#
# Setup (docs/distributed.md, "Multi-node on one machine"): a bridge bbmn<PID>br holding
# 10.247.X.1/24 in this namespace (mpirun runs here), then per host i a namespace bbmn<PID>h<i>, a
# veth pair with one end on the bridge and the other moved into the namespace as eth0 with
# 10.247.X.(10+i), lo up, and "10.247.X.(10+i) bbmn<PID>h<i>" in /etc/hosts. X is a /24 not in use
# here. Names carry this script's PID so concurrent runs do not meet; at start, leftovers of runs
# whose PID is gone (killed with -9) are removed. Teardown always runs (EXIT trap; TERM/INT/HUP are
# forwarded to mpirun first): processes left in the namespaces are killed, namespaces and links
# deleted, and this run's /etc/hosts lines removed (the file is rewritten in place, not replaced:
# in a container it is often a bind mount). Requires root, iproute2, util-linux, OpenMPI.
set -uo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
AGENT="$HERE/mpi-rsh-netns.sh"
HOSTS=2
SLOTS=1
TIMEOUT=0
CHECK=0
PREFIX=bbmn
MARK="# bb-mpi-netns"
LOCK=/run/lock/bb-mpi-netns.lock
[[ -d /run/lock ]] || LOCK=/tmp/bb-mpi-netns.lock

usage() { sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; }
die() { echo "mpi-netns: $*" >&2; exit 2; }
unavailable() { echo "mpi-netns: cannot create network namespaces here: $*" >&2; exit 77; }

while [[ $# -gt 0 ]]; do
  case "$1" in
    --hosts=*) HOSTS=${1#*=} ;;
    --slots=*) SLOTS=${1#*=} ;;
    --timeout=*) TIMEOUT=${1#*=} ;;
    --check) CHECK=1 ;;
    -h | --help) usage; exit 0 ;;
    --) shift; break ;;
    *) die "unknown option \"$1\" (options: --hosts=N --slots=S --timeout=SECONDS --check, then -- and the mpirun arguments)" ;;
  esac
  shift
done
[[ $HOSTS =~ ^[0-9]+$ ]] && ((HOSTS >= 1 && HOSTS <= 200)) || die "--hosts: expected an integer in [1, 200], got \"$HOSTS\""
[[ $SLOTS =~ ^[0-9]+$ ]] && ((SLOTS >= 1)) || die "--slots: expected a positive integer, got \"$SLOTS\""
[[ $TIMEOUT =~ ^[0-9]+$ ]] || die "--timeout: expected seconds (0 = none), got \"$TIMEOUT\""
((CHECK == 1 || $# > 0)) || die "nothing to run: expected -- [MPIRUN_OPTIONS] PROGRAM [ARGS] (see --help)"

# What this needs, with the reason when it is missing (exit 77: the caller may skip).
[[ $(id -u) -eq 0 ]] || unavailable "not root (network namespaces, veth links and /etc/hosts need root)"
for tool in ip unshare flock; do
  command -v "$tool" >/dev/null 2>&1 || unavailable "\"$tool\" not found (Debian: iproute2, util-linux)"
done
((CHECK == 1)) || command -v mpirun >/dev/null 2>&1 || unavailable "mpirun not found (Debian: openmpi-bin; scripts/setup.sh installs it)"
[[ -w /etc/hosts ]] || unavailable "/etc/hosts is not writable"

TAG="$PREFIX$$"
BRIDGE="${TAG}br"
SUBNET=""

hosts_remove() {  # $1: tag; rewrites /etc/hosts in place without that tag's lines
  local kept
  kept=$(grep -v -F -e "$MARK $1" /etc/hosts) || true
  if [[ -n $kept ]]; then printf '%s\n' "$kept" >/etc/hosts; else : >/etc/hosts; fi
}

remove_tag() {  # $1: tag; removes everything a run with that tag made
  local tag=$1 ns pid
  for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^${tag}h[0-9]+$"); do
    for pid in $(ip netns pids "$ns" 2>/dev/null); do kill -9 "$pid" 2>/dev/null; done
    ip netns del "$ns" 2>/dev/null
  done
  for link in $(ip -o link show 2>/dev/null | awk -F': ' '{print $2}' | sed 's/@.*//' | grep -E "^${tag}(br|v[0-9]+)$"); do
    ip link del "$link" 2>/dev/null
  done
  grep -q -F -e "$MARK $tag" /etc/hosts 2>/dev/null && hosts_remove "$tag"
  return 0
}

remove_stale() {  # leftovers of runs whose process is gone
  local tags tag pid
  tags=$( {
    ip netns list 2>/dev/null | awk '{print $1}' | grep -oE "^${PREFIX}[0-9]+h" | sed 's/h$//'
    ip -o link show 2>/dev/null | awk -F': ' '{print $2}' | sed 's/@.*//' | grep -oE "^${PREFIX}[0-9]+(br|v)" | sed -E 's/(br|v)$//'
    grep -oE -e "$MARK ${PREFIX}[0-9]+" /etc/hosts 2>/dev/null | awk '{print $NF}'
  } | sort -u)
  for tag in $tags; do
    pid=${tag#"$PREFIX"}
    if ! kill -0 "$pid" 2>/dev/null; then
      echo "mpi-netns: removing the leftovers of a killed run ($tag)" >&2
      remove_tag "$tag"
    fi
  done
}

TEARDOWN_DONE=0
teardown() {
  ((TEARDOWN_DONE)) && return 0
  TEARDOWN_DONE=1
  exec 9>"$LOCK" && flock 9
  remove_tag "$TAG"
  flock -u 9
  if ip netns list 2>/dev/null | grep -q -E "^${TAG}h"; then
    echo "mpi-netns: teardown left namespaces behind: $(ip netns list | grep -E "^${TAG}h" | tr '\n' ' ')" >&2
  fi
}

# Runs "$@"; on failure tears down and exits naming the command and its error: 77 when it is
# one that only lack of privilege or kernel support makes fail (making a namespace or a link),
# 2 otherwise.
run() {
  local err
  if ! err=$("$@" 2>&1); then
    teardown
    case "$*" in
      "ip netns add "* | "ip link add "*) unavailable "\`$*\` failed: ${err:-no message}" ;;
      *) die "setup: \`$*\` failed: ${err:-no message}" ;;
    esac
  fi
}

trap teardown EXIT
exec 9>"$LOCK"
flock 9
remove_stale

# A /24 that nothing here uses: 10.247.X.0/24, X from the PID, moving on while taken.
for ((i = 0; i < 250; i++)); do
  x=$(((($$ + i) % 250) + 1))
  if ! ip -4 -o addr show 2>/dev/null | grep -q " 10\.247\.$x\." &&
     ! ip -4 route show 2>/dev/null | grep -q "^10\.247\.$x\."; then
    SUBNET="10.247.$x"
    break
  fi
done
[[ -n $SUBNET ]] || { teardown; die "no free /24 in 10.247.0.0/16"; }

# The namespaces first: where `ip netns add` is not allowed, say so (exit 77) before anything else.
run ip netns add "${TAG}h1"
run ip link add "$BRIDGE" type bridge
run ip addr add "$SUBNET.1/24" dev "$BRIDGE"
run ip link set "$BRIDGE" up
HOSTLIST=()
for ((h = 1; h <= HOSTS; h++)); do
  ns="${TAG}h$h"
  if ((h > 1)); then run ip netns add "$ns"; fi
  run ip link add "${TAG}v$h" type veth peer name "${TAG}p$h"
  run ip link set "${TAG}v$h" master "$BRIDGE"
  run ip link set "${TAG}v$h" up
  run ip link set "${TAG}p$h" netns "$ns"
  run ip netns exec "$ns" ip link set "${TAG}p$h" name eth0
  run ip netns exec "$ns" ip addr add "$SUBNET.$((10 + h))/24" dev eth0
  run ip netns exec "$ns" ip link set eth0 up
  run ip netns exec "$ns" ip link set lo up
  printf '%s\n' "$SUBNET.$((10 + h)) $ns $MARK $TAG" >>/etc/hosts
  HOSTLIST+=("$ns:$SLOTS")
done
flock -u 9
exec 9>&-

if ((CHECK)); then
  echo "mpi-netns: ok: made and removed $HOSTS namespaces on $SUBNET.0/24"
  exit 0
fi

IFS=, HOSTARG="${HOSTLIST[*]}"
unset IFS
CMD=(mpirun --allow-run-as-root
  --mca plm_rsh_agent "$AGENT"
  --mca oob_tcp_if_include "$SUBNET.0/24"
  --mca btl_tcp_if_include "$SUBNET.0/24"
  --mca btl tcp,self
  --host "$HOSTARG" "$@")
if ((TIMEOUT > 0)); then CMD=(timeout --kill-after=10 "$TIMEOUT" "${CMD[@]}"); fi
echo "mpi-netns: $HOSTS hosts (${HOSTLIST[*]}) on $SUBNET.0/24: ${CMD[*]}" >&2

# mpirun in the background so that a signal to this script runs the traps at once: forward it to
# mpirun (which forwards it to the ranks), wait, then tear down.
CHILD=0
forward() { ((CHILD > 0)) && kill -"$1" "$CHILD" 2>/dev/null; wait "$CHILD" 2>/dev/null; exit "$2"; }
trap 'forward TERM 143' TERM
trap 'forward INT 130' INT
trap 'forward HUP 129' HUP
"${CMD[@]}" &
CHILD=$!
wait "$CHILD"
rc=$?
((rc == 124)) && echo "mpi-netns: the job ran past --timeout=$TIMEOUT s and was stopped" >&2
exit "$rc"
