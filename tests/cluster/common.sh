# Shared by the cluster scripts (sourced, not run). A "cluster" is a set of Linux
# network namespaces on this machine, one per host, each with a veth eth0 on a
# bridge that lives in a namespace of its own. Everything carries the cluster's
# name, so a cluster never touches anything it did not make.
#
#   CONCORD_CLUSTER   the cluster's name (default ccl); namespaces are
#                     concord-<name>-br and concord-<name>-h<i>, hostnames <name>-h<i>
#   state             /run/concord-cluster/<name>/: hosts (name address), the
#                     per-host /dev/shm directories, the link rate

cluster_name=${CONCORD_CLUSTER:-ccl}
[[ $cluster_name =~ ^[a-z][a-z0-9]{0,5}$ ]] ||
  { echo "cluster: CONCORD_CLUSTER='$cluster_name' must be 1-6 lower-case letters/digits" >&2; exit 2; }
cluster_root=/run/concord-cluster
cluster_state=$cluster_root/$cluster_name
cluster_bridge_ns=concord-$cluster_name-br
# 198.18.0.0/15 is reserved for benchmarking (RFC 2544); it exists only inside
# the cluster's namespaces and nothing routes it anywhere.
cluster_subnet=198.18.0

host_ns() { echo "concord-$cluster_name-h$1"; }
host_name() { echo "$cluster_name-h$1"; }
host_addr() { echo "$cluster_subnet.$(($1 + 1))"; }

cluster_require() {
  [ "$(id -u)" -eq 0 ] || { echo "cluster: needs root (network namespaces)"; return 1; }
  command -v ip >/dev/null && command -v tc >/dev/null ||
    { echo "cluster: needs iproute2 (ip, tc): apt-get install iproute2"; return 1; }
  command -v unshare >/dev/null || { echo "cluster: needs unshare (util-linux)"; return 1; }
  return 0
}

# tbf's bucket must hold at least one rate-millisecond (and 256 KiB), or the
# link caps below its rate at high rates.
tbf_burst() {
  local rate=$1 number bits=0
  number=${rate%%[kmg]bit}
  number=${number%bit}
  case $rate in
    none) ;;
    *kbit) bits=$((number * 1000)) ;;
    *mbit) bits=$((number * 1000000)) ;;
    *gbit) bits=$((number * 1000000000)) ;;
    *) bits=$number ;;
  esac
  local burst=262144
  ((bits / 8000 > burst)) && burst=$((bits / 8000))
  echo "$burst"
}

# The environment of an MPI job on the cluster (mpirun and concordrun alike).
# Inter-host bytes go over TCP through eth0: without UCX_TLS, UCX finds the other
# "hosts'" processes on the same kernel and uses shared memory or CMA. Ranks on
# one host still use MPICH's own shared memory. MPICH 4.0's MPI_Finalize can hang
# over UCX TCP (docs/SCALING.md, "The exit hang"); the ranks preload a deadline
# on its endpoint closes unless CONCORD_CLUSTER_PRELOAD=0 (to show the hang).
cluster_mpi_env() {
  export UCX_TLS=${UCX_TLS:-tcp,self}
  export UCX_NET_DEVICES=${UCX_NET_DEVICES:-eth0}
  local here shim
  here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
  shim=${BUILD_DIR:-$here/../../build}/tests/cluster/libconcord_ucx_close_deadline.so
  if [ "${CONCORD_CLUSTER_PRELOAD:-1}" != 0 ]; then
    [ -f "$shim" ] || { echo "cluster: $shim is not built (it keeps MPI_Finalize from hanging)" >&2; return 1; }
    case ":${LD_PRELOAD:-}:" in *":$shim:"*) ;; *) export LD_PRELOAD=$shim${LD_PRELOAD:+:$LD_PRELOAD} ;; esac
  fi
}
