#!/bin/bash
# The transport seam (issue 26): the master, the master step and the worker
# speak only WorkerInterface (and the step tensor codec), the grpc:// session
# only MasterInterface; none of them speaks gRPC, includes a generated gRPC
# header, handles a bulk ticket, or asks "is this task local". Those belong to
# the transports (rpc/: grpc_remote_worker, grpc_remote_master, worker_cache,
# tensor codecs; bulk/; worker/local_worker; master/local_master). Usage: transport_seam_test.sh SOURCE_DIR
set -u
src="${1:?usage: $0 SOURCE_DIR}/src"
seam_files=(
  master/master.h master/master.cc
  master/master_session.h master/master_session.cc master/master_session_impl.h
  master/master_step.cc
  worker/worker.h worker/worker.cc
  rpc/worker_interface.h rpc/worker_interface.cc
  rpc/ask_tasks.h rpc/ask_tasks.cc
  worker/local_worker.h worker/local_worker.cc
  server/grpc_session.h server/grpc_session.cc
  client/session.cc
  worker/worker_collective_transport.h worker/worker_collective_transport.cc
)
# Collectives (issue 29): every file of collective/ and the collective
# kernels, whatever is added there later.
for f in "$src"/collective/*.h "$src"/collective/*.cc "$src"/kernels/collective.h "$src"/kernels/collective.cc \
         "$src"/kernels/cpu/collective_kernels.cc; do
  seam_files+=("${f#"$src"/}")
done
declare -A rules=(
  [gRPC]='grpc::|grpcpp/|\.grpc\.pb\.h'
  ["bulk tickets"]='bulk_ticket|TakeOffer|TakeReceived|PutLocal|->Offer\(|FetchBulk|BulkRef|SetBulkNamedTensor|BulkTensorSpec|DropBulkFeeds'
  ["shared memory"]='memfd|SCM_RIGHTS|ShmRing|shm_|SharedMemory'
  ["a local-or-remote branch"]='local_call|local_worker_|LocalMasterLease|InProcessMaster|dynamic_cast<Grpc'
)
failed=0
for f in "${seam_files[@]}"; do
  if [[ ! -f "$src/$f" ]]; then
    echo "FAIL: $src/$f is missing (update the list in $0)"
    failed=1
    continue
  fi
  for what in "${!rules[@]}"; do
    if hits=$(grep -nE "${rules[$what]}" "$src/$f"); then
      echo "FAIL: $f speaks $what, which belongs behind the transport seam:"
      echo "$hits" | sed 's/^/  /'
      failed=1
    fi
  done
done
# The rules must find what they look for where it belongs, or they prove nothing.
for check in "gRPC:rpc/grpc_remote_worker.cc" "bulk tickets:rpc/grpc_remote_worker.cc" \
             "gRPC:rpc/grpc_remote_master.cc" "bulk tickets:rpc/grpc_remote_master.cc" \
             "bulk tickets:master/local_master.cc" "shared memory:bulk/shm_channel.cc"; do
  what="${check%%:*}" f="${check#*:}"
  if ! grep -qE "${rules[$what]}" "$src/$f"; then
    echo "FAIL: the $what rule finds nothing in $f, where it should"
    failed=1
  fi
done
# gloo's split: the collective algorithms and executor see only
# collective/transport.h, never a concrete transport or the layers above.
if hits=$(grep -nE '#include "(rpc|worker|bulk|server|master|coordination)/' "$src"/collective/*.h "$src"/collective/*.cc); then
  echo "FAIL: collective/ reaches a concrete transport; it speaks CollectiveTransport only:"
  echo "$hits" | sed 's/^/  /'
  failed=1
fi
# The client picks no transport: sessions come from the registry by target
# (runtime/session_factory.h), so client/ includes nothing of the runtime
# above it and names no transport.
if hits=$(grep -nE '"(server|rpc|master|worker|bulk|coordination)/|GrpcSession|grpc://|dynamic_cast' "$src"/client/*.cc "$src"/client/*.h); then
  echo "FAIL: client/ reaches into the distributed runtime or picks a transport:"
  echo "$hits" | sed 's/^/  /'
  failed=1
fi
# gRPC lives in the transport (rpc/) and in what assembles a server from it
# (server/: the services, GrpcServer); every other layer of src/ (the
# coordination agent included: rpc/coordinator_client) speaks none. Tests
# that start real servers may.
if hits=$(grep -rnE "${rules[gRPC]}" "$src" --include=*.h --include=*.cc | grep -vE "^$src/(rpc|server)/|_test\.cc:"); then
  echo "FAIL: gRPC outside rpc/ and server/ (put the calls behind rpc/, as rpc/coordinator_client does):"
  echo "$hits" | sed 's/^/  /'
  failed=1
fi
# Nor through the headers they include: a file outside rpc/ and server/ (and
# the grpc:// session) includes no project header that reaches, however
# deeply, a generated *.grpc.pb.h or gRPC's own headers. The master and the
# worker hold a WorkerCacheInterface (rpc/worker_cache_interface.h), not the
# gRPC WorkerCache (rpc/worker_cache.h); the session gets its remote master
# from rpc/remote_master.h, not rpc/grpc_remote_master.h.
declare -A grpc_chain=()  # file (relative to src/) -> its include chain to gRPC, "" if none
declare -A includes_of=()  # file (relative to src/) -> what it #includes, one a line
include_re='^([^:]*):[[:space:]]*#[[:space:]]*include[[:space:]]*[<"]([^">]+)[">]'
while IFS= read -r line; do
  [[ $line =~ $include_re ]] || continue
  f=${BASH_REMATCH[1]#"$src"/}
  includes_of[$f]+="${BASH_REMATCH[2]}"$'\n'
done < <(grep -rHE '^[[:space:]]*#[[:space:]]*include[[:space:]]*[<"]' "$src" "$src/../include" --include=*.h --include=*.cc)
# Sets REPLY to the include chain from src/$1 to a gRPC header, or "".
find_grpc_include() {
  local f=$1 inc path result=""
  if [[ -n ${grpc_chain[$f]+set} ]]; then
    REPLY=${grpc_chain[$f]}
    return
  fi
  grpc_chain[$f]=""  # while being read: an include cycle adds nothing
  while IFS= read -r inc; do
    if [[ $inc =~ \.grpc\.pb\.h$|^grpcpp/|^grpc/ ]]; then
      result="$f > $inc"
      break
    fi
    if [[ -f "$src/$inc" ]]; then
      path=$inc
    elif [[ -f "$src/../include/$inc" ]]; then
      path="../include/$inc"
    else
      continue  # the standard library, abseil, protobuf, a generated *.pb.h
    fi
    find_grpc_include "$path"
    if [[ -n $REPLY ]]; then
      result="$f > $REPLY"
      break
    fi
  done <<<"${includes_of[$f]-}"
  grpc_chain[$f]=$result
  REPLY=$result
}
gRPC_free=(server/grpc_session.h server/grpc_session.cc)
while IFS= read -r f; do
  gRPC_free+=("${f#"$src"/}")
done < <(find "$src" \( -name '*.h' -o -name '*.cc' \) ! -path "$src/rpc/*" ! -path "$src/server/*" \
  ! -name '*test*' | sort)
for f in "${gRPC_free[@]}"; do
  find_grpc_include "$f"
  if [[ -n $REPLY ]]; then
    echo "FAIL: $f includes gRPC through project headers: $REPLY"
    echo "  (hold the seam instead: rpc/worker_cache_interface.h, rpc/worker_interface.h, rpc/master_interface.h, rpc/remote_master.h)"
    failed=1
  fi
done
# ... and the walk must find gRPC where it is, or it proves nothing.
for f in rpc/worker_cache.h rpc/grpc_remote_master.h server/grpc_server.h master/master_test_fixture.h; do
  find_grpc_include "$f"
  if [[ -z $REPLY ]]; then
    echo "FAIL: the include walk finds no gRPC header under $f, where there is one"
    failed=1
  fi
done
[[ $failed == 0 ]] && echo "OK: ${#seam_files[@]} files behind the transport seam; ${#gRPC_free[@]} files include no gRPC, however deeply"
exit $failed
