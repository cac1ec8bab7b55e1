#!/bin/sh
# OpenMPI's remote-shell agent for scripts/mpi-netns.sh (`--mca plm_rsh_agent <this script>`).
# mpirun calls it as it would call ssh: `mpi-rsh-netns.sh [options] HOST COMMAND...`. The "host"
# is a network namespace of the same name (made by mpi-netns.sh); COMMAND (OpenMPI's daemon,
# orted) runs inside it with its own UTS namespace whose hostname is HOST, so every "host" has its
# own name and its own network interface, as separate machines would.
while [ $# -gt 0 ]; do
  case "$1" in
    -*) shift ;;  # ssh-style options (none expected from OpenMPI for a custom agent)
    *) break ;;
  esac
done
if [ $# -lt 2 ]; then
  echo "mpi-rsh-netns.sh: expected HOST COMMAND..., got: $*" >&2
  exit 2
fi
host=$1
shift
case "$host" in
  *[!A-Za-z0-9_-]* | "")
    echo "mpi-rsh-netns.sh: host \"$host\" is not a namespace name made by mpi-netns.sh" >&2
    exit 2
    ;;
esac
if ! ip netns list | grep -q "^$host\( \|\$\)"; then
  echo "mpi-rsh-netns.sh: no network namespace \"$host\" (hint: run through scripts/mpi-netns.sh)" >&2
  exit 2
fi
# ssh joins its arguments with spaces and the remote shell parses them; so does this.
exec ip netns exec "$host" unshare --uts sh -c "hostname $host && $*"
