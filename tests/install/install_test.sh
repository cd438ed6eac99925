#!/usr/bin/env bash
# Installs the built tree into a temporary prefix and uses it as an outsider
# would: builds tests/install/consumer against it with find_package (shared
# and static) and with pkg-config, and runs each; checks the shared library's
# SONAME and that it exports only the public API; checks that the
# installed headers are the public API only (self-contained, no protobuf,
# gRPC, Eigen or oneDNN) and that every example and the training benchmark
# compile with nothing but them; builds the Debian
# package with cpack, checks its name and dependencies, extracts it with
# dpkg -x and runs the packaged distflow-server against the packaged library.
#   install_test.sh BUILD_DIR SOURCE_DIR VERSION
set -euo pipefail
BUILD=$(cd "$1" && pwd)
SRC=$(cd "$2" && pwd)
VERSION=$3
MAJOR=${VERSION%%.*}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
step() { echo "== $*"; }

step "cmake --install into $tmp/prefix"
cmake --install "$BUILD" --prefix "$tmp/prefix" > "$tmp/install.log"
P=$tmp/prefix
LIBDIR=
for d in "$P/lib" "$P"/lib/*-linux-gnu; do
  if [ -e "$d/libdistflow.so" ]; then LIBDIR=$d; fi
done
[ -n "$LIBDIR" ] || fail "no libdistflow.so installed: $(cat "$tmp/install.log")"
for f in "$P/bin/distflow-server" "$P/bin/distflow-launch" "$LIBDIR/libdistflow.so.$VERSION" "$LIBDIR/libdistflow.a" \
         "$LIBDIR/cmake/distflow/distflowConfig.cmake" "$LIBDIR/pkgconfig/distflow.pc" \
         "$P/include/distflow/distflow.h" "$P/include/distflow/scope.h" "$P/include/distflow/train/optimizer.h" \
         "$P/include/distflow/data/mnist.h"; do
  [ -e "$f" ] || fail "not installed: $f"
done
[ "$(readlink "$LIBDIR/libdistflow.so")" = "libdistflow.so.$MAJOR" ] || fail "libdistflow.so does not point at the SONAME"
for internal in proto kernels runtime graph client distributed base tensor; do
  [ ! -e "$P/include/distflow/$internal" ] || fail "internal headers were installed: $P/include/distflow/$internal"
done
found=$(find "$P/include" -name '*test*')
[ -z "$found" ] || fail "test helpers were installed: $(find "$P/include" -name '*test*')"

step "public headers: only distflow's and abseil's, each self-contained"
mapfile -t headers < <(cd "$P/include" && find distflow -name '*.h' | sort)
[ "${#headers[@]}" -ge 20 ] || fail "only ${#headers[@]} public headers installed"
for h in "${headers[@]}"; do
  # Every quoted include names another installed header or abseil's.
  while read -r inc; do
    case "$inc" in
      absl/*) ;;
      distflow/*) [ -e "$P/include/$inc" ] || fail "$h includes $inc, which is not installed" ;;
      *) fail "$h includes \"$inc\": public headers include only distflow/ and absl/" ;;
    esac
  done < <(sed -n 's/^#include "\(.*\)".*/\1/p' "$P/include/$h")
  if grep -n -E '#include <(google/protobuf|grpcpp|grpc/|Eigen|unsupported/Eigen|oneapi|dnnl)' "$P/include/$h"; then
    fail "$h includes a protobuf, gRPC, Eigen or oneDNN header"
  fi
  # Unprefixed macros would collide with a program's own LOG or CHECK.
  if grep -n -E '^#define (LOG|CHECK|CHECK_OK|DCHECK|RETURN_IF_ERROR|ASSIGN_OR_RETURN)\b' "$P/include/$h"; then
    fail "$h defines a macro without the DF_ prefix"
  fi
  echo "#include \"$h\"" > "$tmp/one.cc"
  g++ -std=c++20 -fsyntax-only -I"$P/include" "$tmp/one.cc" 2> "$tmp/one.log" ||
    { cat "$tmp/one.log"; fail "$h does not compile on its own with only the installed headers"; }
done

step "examples, the training benchmark and the Python binding compile with only the installed headers"
py_include=$(/usr/bin/python3 -c 'import sysconfig; print(sysconfig.get_paths()["include"])')
for f in "$SRC"/examples/*.cc "$SRC"/bench/train_bench.cc "$SRC"/python/src/*.cc; do
  g++ -std=c++20 -fsyntax-only -I"$P/include" -I"$py_include" "$f" 2> "$tmp/example.log" ||
    { head -20 "$tmp/example.log"; fail "$(basename "$f") reaches outside the public headers"; }
done

step "SONAME and exported symbols"
soname=$(readelf -d "$LIBDIR/libdistflow.so.$VERSION" | sed -n 's/.*Library soname: \[\(.*\)\]/\1/p')
[ "$soname" = "libdistflow.so.$MAJOR" ] || fail "SONAME is '$soname'"
# Every defined dynamic symbol is distflow's. grep -v exits 1 when it keeps
# nothing, which is the passing case: hence || true.
so="$LIBDIR/libdistflow.so.$VERSION"
foreign=$(nm -D --defined-only "$so" | awk '{print $3}' |
          grep -v -E '^(_ZN|_ZNK|_ZNO|_ZNR|_ZNKO|_ZNKR|_ZTVN|_ZTIN|_ZTSN|_ZTTN|_ZGVN|_ZZN|_ZZNK|_ZTh[^N]*N|_ZTv[^N]*N)8distflow|^_init$|^_fini$' || true)
[ -z "$foreign" ] || fail "libdistflow.so exports symbols that are not distflow's: $(echo "$foreign" | head -5)"
# ... and of distflow's, only the public API (DISTFLOW_EXPORT in
# include/distflow/): the runtime's classes stay inside the library.
api=$(nm -DC --defined-only "$so" | cut -d' ' -f3-)
inside=$(grep -E '^((typeinfo|typeinfo name|vtable|VTT) for )?distflow::(GrpcServer|Executor|MasterSession|Master|Worker|WorkerCache|BulkServer|BulkClient|Graph|OpKernel|KernelRegistry|ResourceMgr|LocalSession|Rendezvous|ThreadPool|Timer|Env|CoordinationService|proto|internal::Var)(::|$| )' <<< "$api" || true)
[ -z "$inside" ] || fail "libdistflow.so exports internals: $(echo "$inside" | head -5)"
for public in 'distflow::Session::Run(' 'distflow::Server::Create(' 'distflow::ops::MatMul(' 'distflow::Tensor::Slice(' \
              'distflow::MonitoredSession::Run(' 'distflow::ClusterSpec::Parse(' 'distflow::data::ReadDataSets(' \
              'typeinfo for distflow::Optimizer' 'vtable for distflow::SessionRunHook' 'distflow::layers::kRelu'; do
  grep -qF -- "$public" <<< "$api" || fail "libdistflow.so does not export $public"
done
exported=$(wc -l <<< "$api")
echo "libdistflow.so exports $exported symbols"
[ "$exported" -gt 250 ] || fail "only $exported symbols exported"

step "find_package(distflow CONFIG): shared and static"
cmake -S "$SRC/tests/install/consumer" -B "$tmp/cb" -G Ninja -DCMAKE_PREFIX_PATH="$P" -DCMAKE_BUILD_TYPE=Release \
  > "$tmp/consumer-configure.log" || { cat "$tmp/consumer-configure.log"; fail "configuring the consumer"; }
cmake --build "$tmp/cb" > "$tmp/consumer-build.log" 2>&1 || { tail -50 "$tmp/consumer-build.log"; fail "building the consumer"; }
out=$("$tmp/cb/consumer") || fail "consumer (shared) failed: $out"
grep -q "^distflow $VERSION$" <<< "$out" || fail "consumer reports another version: $out"
grep -q "consumer: ok" <<< "$out" || fail "consumer: $out"
# (Outputs are taken whole first: with pipefail, grep -q closing a pipe
# early would fail the writer with SIGPIPE.)
deps=$(ldd "$tmp/cb/consumer")
grep -q "libdistflow.so.$MAJOR => $LIBDIR/" <<< "$deps" || fail "the consumer does not use the installed library: $deps"
out=$("$tmp/cb/consumer_static") || fail "consumer (static) failed: $out"
grep -q "consumer: ok" <<< "$out" || fail "consumer_static: $out"
deps=$(ldd "$tmp/cb/consumer_static")
! grep -q libdistflow <<< "$deps" || fail "the static consumer loads libdistflow.so"

step "pkg-config"
export PKG_CONFIG_PATH="$LIBDIR/pkgconfig"
[ "$(pkg-config --modversion distflow)" = "$VERSION" ] || fail "pkg-config version"
# shellcheck disable=SC2046
g++ -O1 "$SRC/tests/install/consumer/consumer.cc" -o "$tmp/pc_consumer" $(pkg-config --cflags --libs distflow) \
  || fail "building with pkg-config"
out=$(LD_LIBRARY_PATH="$LIBDIR" "$tmp/pc_consumer") || fail "pkg-config consumer failed: $out"
grep -q "consumer: ok" <<< "$out" || fail "pkg-config consumer: $out"

step "cpack -G DEB"
(cd "$BUILD" && cpack -G DEB -B "$tmp/deb" > "$tmp/cpack.log" 2>&1) || { tail -30 "$tmp/cpack.log"; fail "cpack"; }
deb="$tmp/deb/distflow_${VERSION}_amd64.deb"
[ -f "$deb" ] || fail "no $deb: $(ls "$tmp/deb")"
depends=$(dpkg-deb -f "$deb" Depends)
echo "Depends: $depends"
for d in libc6 libstdc++6 libgrpc++ libprotobuf libabsl libdnnl libisal libcpp-httplib; do
  grep -q "$d" <<< "$depends" || fail "the package does not depend on $d"
done
[ "$(dpkg-deb -f "$deb" Package)" = distflow ] || fail "package name"
[ "$(dpkg-deb -f "$deb" Architecture)" = amd64 ] || fail "architecture"
# The package says which instruction set it needs: a native build only this
# kind of CPU, the default a portable baseline with run-time dispatch.
arch_flags=$(sed -n 's/^DISTFLOW_ARCH_FLAGS:STRING=//p' "$BUILD/CMakeCache.txt")
description=$(dpkg-deb -f "$deb" Description)
if [[ "$arch_flags" == *native* ]]; then
  grep -q -- "-march=native: it runs only on CPUs" <<< "$description" ||
    fail "the package does not say it was built for this CPU: $description"
else
  grep -q -- "Built with $arch_flags; the hot kernel loops choose AVX2 or" <<< "$description" ||
    fail "the package does not say it is built for $arch_flags with run-time dispatch: $description"
fi
dpkg -x "$deb" "$tmp/root"
server="$tmp/root/usr/bin/distflow-server"
[ -x "$server" ] || fail "no distflow-server in the package: $(dpkg -c "$deb" | head -20)"
resolved=$(ldd "$server" | awk -v so="libdistflow.so.$MAJOR" '$1 == so {print $3}')
[ -n "$resolved" ] && [ "$(readlink -f "$resolved")" = "$(readlink -f "$tmp/root/usr/lib/libdistflow.so.$MAJOR")" ] ||
  fail "the packaged server does not load the packaged library: $(ldd "$server" | grep distflow)"
# absl's --help exits 1 after printing; the text is what is checked.
help=$("$server" --help 2>&1 || true)
for flag in --cluster_spec --job_name --task_index --status_port; do
  grep -q -- "$flag" <<< "$help" || fail "packaged distflow-server --help does not list $flag: $help"
done
ver=$("$server" --version) || fail "packaged distflow-server --version failed: $ver"
grep -q "^distflow-server $VERSION$" <<< "$ver" || fail "packaged distflow-server --version: $ver"
grep -q "^kernels: " <<< "$ver" || fail "packaged distflow-server --version does not name the kernels' instruction set: $ver"
lhelp=$("$tmp/root/usr/bin/distflow-launch" --help 2>&1 || true)
grep -q -- "--workers" <<< "$lhelp" || fail "packaged distflow-launch --help: $lhelp"
code=0
"$server" --job_name=nope > "$tmp/bad.log" 2>&1 || code=$?
[ "$code" = 2 ] || fail "packaged distflow-server with bad flags exited $code: $(cat "$tmp/bad.log")"
echo "all checks passed"
