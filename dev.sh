#!/usr/bin/env bash
# One entry point for newcomers and CI:
#   sudo ./dev.sh demo   install dependencies, build, profile the bundled demo workload
#   sudo ./dev.sh test   install dependencies, build, run every test (BPF tests need root)
#   ./dev.sh build       build only
set -euo pipefail
cd "$(dirname "$0")"

PACKAGES=(build-essential cmake pkg-config clang llvm libbpf-dev bpftool libelf-dev libdw-dev libjemalloc-dev
          libcli11-dev clang-format libtcmalloc-minimal4 libmimalloc2.0 musl-tools systemtap-sdt-dev libgtest-dev libcapstone-dev nlohmann-json3-dev libcpp-httplib-dev prometheus systemd util-linux libprotobuf-dev protobuf-compiler zlib1g-dev golang-go chromium)
BUILD=${BUILD_DIR:-build}

install_deps() {
  local missing=()
  for p in "${PACKAGES[@]}"; do
    dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return
  echo "dev.sh: installing ${missing[*]}"
  local sudo=""
  [ "$(id -u)" -eq 0 ] || sudo=sudo
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
}

build() {
  cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DALLOCSCOPE_WERROR=ON >/dev/null
  cmake --build "$BUILD" -j"$(nproc)"
}

demo() {
  echo "dev.sh: recording the demo workload (build/tests/alloc_sites) into demo.pb.gz, demo.svg, demo.folded"
  "$BUILD/allocscope" record -o demo.pb.gz -o demo.svg -o demo.folded -- "$BUILD/tests/alloc_sites" --scale-pct 20
  echo
  "$BUILD/allocscope" report demo.pb.gz --top 10
  echo
  echo "dev.sh: open demo.svg in a browser for the flame graph; 'go tool pprof demo.pb.gz' also reads the profile"
}

run_tests() {
  # On CI, a BPF test that cannot run is a failure, not a skip.
  if [ -n "${CI:-}" ]; then export ALLOCSCOPE_REQUIRE_BPF=1; fi
  local log
  log=$(mktemp)
  set +e
  ctest --test-dir "$BUILD" --output-on-failure 2>&1 | tee "$log"
  local status=${PIPESTATUS[0]}
  set -e
  if [ -n "${CI:-}" ] && grep -qE '\*\*\*Skipped|\[  SKIPPED \]' "$log"; then
    echo "dev.sh: tests were skipped on CI; they must run here" >&2
    status=1
  fi
  rm -f "$log"
  return "$status"
}

case "${1:-}" in
  demo) install_deps; build; demo ;;
  test) install_deps; build; run_tests ;;
  build) build ;;
  *) echo "usage: $0 demo|test|build" >&2; exit 2 ;;
esac
