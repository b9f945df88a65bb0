#!/usr/bin/env bash
# One entry point for newcomers and CI:
#   sudo ./dev.sh demo   install dependencies, build, profile the bundled demo workload
#   sudo ./dev.sh test   install dependencies, build, run every test (BPF tests need root),
#                        then again under ASan and UBSan, then the fuzzers
#   ./dev.sh build       build only
#   sudo ./dev.sh sanitize / fuzz   one of test's later stages alone
set -euo pipefail
cd "$(dirname "$0")"

PACKAGES=(build-essential cmake pkg-config clang llvm libbpf-dev bpftool libelf-dev libdw-dev libjemalloc-dev
          libcli11-dev clang-format libtcmalloc-minimal4 libmimalloc2.0 musl-tools systemtap-sdt-dev libgtest-dev libcapstone-dev nlohmann-json3-dev libcpp-httplib-dev clang-16 libclang-rt-16-dev prometheus systemd libseccomp-dev util-linux libprotobuf-dev protobuf-compiler zlib1g-dev golang-go chromium)
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
  cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DALLOCSCOPE_WERROR=ON >/dev/null || return
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

# ctest in build tree $1 (more ctest arguments after it). On CI, a BPF test
# that cannot run is a failure, not a skip.
run_tests() {
  local dir=$1
  shift
  if [ -n "${CI:-}" ]; then export ALLOCSCOPE_REQUIRE_BPF=1; fi
  local log
  log=$(mktemp)
  set +e
  ctest --test-dir "$dir" --output-on-failure "$@" 2>&1 | tee "$log"
  local status=${PIPESTATUS[0]}
  set -e
  if [ -n "${CI:-}" ] && grep -qE '\*\*\*Skipped|\[  SKIPPED \]' "$log"; then
    echo "dev.sh: tests were skipped on CI; they must run here" >&2
    status=1
  fi
  rm -f "$log"
  return "$status"
}

# Integration tests whose assertions hold only when allocscope keeps pace
# with its targets (ASan makes it 2-3 times slower: short-lived processes end
# before it reads them, the agent's reader falls behind and counts drops), or
# when allocscope's own allocator is jemalloc (under ASan it is ASan's, which
# a preloaded tcmalloc or jemalloc then fights, and the child it forks before
# exec allocates through probed code). Under the sanitizers they still run,
# for the sanitizers' reports; their assertions are the main build's.
PACED_TESTS='AllProcesses\.(ShortLivedProcesses|PrivateCopyOfTheCLibrary|UnitFilterFollows)|Children\.ProgramsAShellRuns'
PACED_TESTS+='|Agent\.(GoPprofReads|PrometheusScrapes|BadRequestsAndFloods|ChurnSoak)|DeepStacks\.ExactModeCounts'
PACED_TESTS+='|Allocators\.(PreloadedAllocatorsCount|CxxOperatorsOfTcmalloc|InProcessSamplingOnEvery)'

# allocscope and its unit and integration tests under ASan and UBSan. Any
# report of theirs, from any process, fails the stage.
sanitized() {
  # No -Werror: GCC 12 warns falsely (-Wrestrict) in code the sanitizers instrument.
  cmake -S . -B "$BUILD-sanitize" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DALLOCSCOPE_SANITIZE=ON \
    -DALLOCSCOPE_WERROR=OFF >/dev/null || return
  cmake --build "$BUILD-sanitize" -j"$(nproc)" || return
  echo "dev.sh: unit and integration tests under AddressSanitizer and UBSan"
  local reports status=0
  reports=$(mktemp -d)
  export ASAN_OPTIONS="detect_leaks=1:strict_string_checks=1:check_initialization_order=1:verify_asan_link_order=0:log_path=$reports/asan"
  export UBSAN_OPTIONS="print_stacktrace=1:log_path=$reports/ubsan"
  run_tests "$BUILD-sanitize" -L 'unit|integration' -E "$PACED_TESTS" || status=$?
  echo "dev.sh: tests that need allocscope's full speed, run for the sanitizers' reports only"
  ctest --test-dir "$BUILD-sanitize" -R "$PACED_TESTS" >/dev/null 2>&1 || true
  unset ASAN_OPTIONS UBSAN_OPTIONS
  if [ -n "$(ls -A "$reports")" ]; then
    echo "dev.sh: sanitizer reports:" >&2
    cat "$reports"/* >&2
    [ "$status" -ne 0 ] || status=1
  fi
  rm -rf "$reports"
  return "$status"
}

# The libFuzzer harnesses (tests/fuzz), each for FUZZ_SECONDS from its corpus.
fuzz() {
  CC=clang-16 CXX=clang++-16 cmake -S . -B "$BUILD-fuzz" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DALLOCSCOPE_FUZZ=ON \
    -DALLOCSCOPE_FUZZ_SECONDS="${FUZZ_SECONDS:-30}" >/dev/null || return
  cmake --build "$BUILD-fuzz" -j"$(nproc)" --target fuzz_pprof fuzz_text fuzz_elf fuzz_code || return
  echo "dev.sh: fuzzing each parser for ${FUZZ_SECONDS:-30} s"
  run_tests "$BUILD-fuzz" -L fuzz
}

# Every stage runs; the first failure's status is returned.
all_tests() {
  local status=0
  build && run_tests "$BUILD" || status=$?
  sanitized || [ "$status" -ne 0 ] || status=$?
  fuzz || [ "$status" -ne 0 ] || status=$?
  return "$status"
}

case "${1:-}" in
  demo) install_deps; build; demo ;;
  test) install_deps; all_tests ;;
  build) build ;;
  sanitize) install_deps; sanitized ;;
  fuzz) install_deps; fuzz ;;
  *) echo "usage: $0 demo|test|build|sanitize|fuzz" >&2; exit 2 ;;
esac
