#!/usr/bin/env bash
# One entry point for newcomers and CI (as root, or as a user with sudo):
#   ./dev.sh demo    install what allocscope needs, build it, profile the bundled demo workload
#   ./dev.sh check   the fast tier, after every change: build, unit tests, the core real-BPF
#                    integration tests (a clean clone: build 4.5 minutes, tests 5.5, on 2 cores)
#   ./dev.sh test    the full tier, what CI runs: every test, the kernel matrix, a clang (Debug)
#                    build, the .deb built and tested installed, the tests
#                    again under ASan and UBSan, then the fuzzers
#   ./dev.sh build   build allocscope and its tests (installs what is missing when root)
#   ./dev.sh check-tests   the fast tier's tests on the build as it is (bench/flakes.py runs it)
#   ./dev.sh main / matrix / package-test / sanitize / fuzz / kernels   one of test's later stages alone
#   ./dev.sh package   the Debian package (dpkg-buildpackage, lintian) into dist/
set -euo pipefail
cd "$(dirname "$0")"

# What building allocscope (and the demo workload) needs; a JDK's headers
# for the preload library's JVMTI agent; curl for the README's agent example.
BUILD_PACKAGES=(build-essential cmake pkg-config clang llvm libbpf-dev bpftool libelf-dev libdw-dev libjemalloc-dev
                libcli11-dev libcapstone-dev nlohmann-json3-dev libcpp-httplib-dev libprotobuf-dev protobuf-compiler
                zlib1g-dev systemtap-sdt-dev libboost-math-dev libre2-dev libpcap-dev default-jdk-headless curl)
# What the tests need besides: other allocators and a static libc, GoogleTest,
# the agent's consumers (Prometheus, Go's pprof), a browser, the other
# compiler, packaging tools, QEMU with what a guest is made of, and a node
# (a runtime whose heap is named; the JVM comes with the build's JDK).
TEST_PACKAGES=(libgtest-dev clang-format python3.11 libpython3.11-dev libtcmalloc-minimal4 libmimalloc2.0 musl-tools clang-16
               libclang-rt-16-dev prometheus systemd libseccomp-dev util-linux golang-go chromium debhelper lintian
               mmdebstrap man-db zsh qemu-system-x86 busybox-static cpio kmod xz-utils uwsgi-core uwsgi-plugin-python3 dwz
               libdebuginfod1 binutils ccache
               nodejs)
BUILD=${BUILD_DIR:-build}

missing_packages() {
  local p
  for p in "$@"; do
    dpkg -s "$p" >/dev/null 2>&1 || echo "$p"
  done
}

# Installs the packages named that are missing: as root, or through sudo.
# With --lean first, without the packages they only recommend.
install_packages() {
  local missing lean=()
  [ "${1:-}" != --lean ] || { lean=(--no-install-recommends); shift; }
  mapfile -t missing < <(missing_packages "$@")
  [ ${#missing[@]} -eq 0 ] && return
  local sudo=""
  if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null || {
      echo "dev.sh: missing packages; as root run: apt-get install ${missing[*]}" >&2
      return 1
    }
    sudo=sudo
  fi
  echo "dev.sh: installing ${missing[*]}"
  $sudo apt-get update -qq || return
  local install=(apt-get install -y -qq "${lean[@]}" "${missing[@]}") io=()
  # dpkg syncs each file it writes before renaming it into place: on a VM's
  # disk that was two thirds of the demo's installation (111 s, 39 without).
  # When the installation only adds packages (apt upgrades and removes
  # nothing), it skips those syncs and syncs once at the end: a crash while it
  # runs can then only harm the packages it was adding, never installed ones.
  if ! apt-get -s "${install[@]:1}" 2>/dev/null | grep -qE '^(Inst [^ ]+ \[|Remv )'; then
    io=(-o Dpkg::Options::=--force-unsafe-io)
  fi
  $sudo env DEBIAN_FRONTEND=noninteractive "${install[@]}" "${io[@]}" >/dev/null || return
  [ ${#io[@]} -eq 0 ] || sync
}

install_deps() { install_packages "${BUILD_PACKAGES[@]}" "${TEST_PACKAGES[@]}" && use_ccache; }

# The build's packages present, or one line that says how to get them (root
# installs them).
require_build_packages() {
  local missing
  mapfile -t missing < <(missing_packages "${BUILD_PACKAGES[@]}" "${TEST_PACKAGES[@]}")
  [ ${#missing[@]} -eq 0 ] && return
  if [ "$(id -u)" -eq 0 ]; then install_deps; return; fi
  echo "dev.sh: missing packages ${missing[*]}; './dev.sh deps' (root or sudo) installs them" >&2
  return 1
}

# The newest Debian release's Go (trixie's), fetched once into a cache: the
# tests build their Go programs with it beside bookworm's golang-go. Offline,
# the build goes on without it and the tests that need it fail, saying so.
NEWER_GO_VERSION=1.24
newer_go() {
  tests/go/fetch.sh "$NEWER_GO_VERSION" "${ALLOCSCOPE_GO_CACHE:-$(cache_home)/go}" ||
    echo "dev.sh: warning: Go $NEWER_GO_VERSION could not be fetched; the tests that build with it will fail" >&2
}

# The Go releases hosts run today, fetched likewise (VERSION:SUITE: trixie's
# backports have 1.25, sid 1.26 and 1.27): their go commands, separated by
# ';' (CMake's list), as many as were had.
MORE_GO_VERSIONS=(1.25:trixie-backports 1.26:sid 1.27:sid)
more_gos() {
  local v go gos=()
  for v in "${MORE_GO_VERSIONS[@]}"; do
    if go=$(tests/go/fetch.sh "${v%%:*}" "${ALLOCSCOPE_GO_CACHE:-$(cache_home)/go}" "${v#*:}"); then
      gos+=("$go")
    else
      echo "dev.sh: warning: Go ${v%%:*} (${v#*:}) could not be fetched; the tests that build with it will fail" >&2
    fi
  done
  (IFS=';' && echo "${gos[*]}")
}

# Go's build cache for the tests' Go programs, kept across build trees (a
# clean clone's build compiled two Go releases' runtimes anew each time).
# Go's cache is keyed by content, and safe to share between builds.
go_build_cache() {
  echo "${ALLOCSCOPE_GO_BUILD_CACHE:-$(cache_home)/go-build}"
}

# Where caches kept across build trees live (the caller's ~/.cache).
cache_home() {
  local home=${HOME:-$(getent passwd "$(id -u)" | cut -d: -f6)}
  echo "${XDG_CACHE_HOME:-$home/.cache}/allocscope"
}

# Compiled objects kept across build trees by ccache where it is installed (a
# test run builds a clean clone five ways): keyed by the compiler, its flags
# and the preprocessed source, so a changed header is never missed. Bounded.
use_ccache() {
  command -v ccache >/dev/null || return 0
  export CCACHE_DIR=${CCACHE_DIR:-$(cache_home)/ccache} CCACHE_MAXSIZE=${CCACHE_MAXSIZE:-4G}
  export CCACHE_SLOPPINESS=${CCACHE_SLOPPINESS:-pch_defines,time_macros}  # precompiled headers; no __TIME__
  export CMAKE_C_COMPILER_LAUNCHER=${CMAKE_C_COMPILER_LAUNCHER:-ccache} CMAKE_CXX_COMPILER_LAUNCHER=${CMAKE_CXX_COMPILER_LAUNCHER:-ccache}
}

# Line tables only (-g1: backtraces, perf and inlined frames, no variables),
# a quarter less compile time than -g; `cmake -DCMAKE_CXX_FLAGS_RELWITHDEBINFO=
# "-O2 -g"` in $BUILD for a debugger's whole view.
build() {
  local go more
  go=$(newer_go)
  more=$(more_gos)
  cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DALLOCSCOPE_WERROR=ON -DBUILD_TESTING=ON -DALLOCSCOPE_TEST_HOOKS=ON \
    -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -g1 -DNDEBUG" -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O2 -g1 -DNDEBUG" \
    -DALLOCSCOPE_BENCH=ON -DALLOCSCOPE_NEWER_GO="$go" -DALLOCSCOPE_MORE_GOS="$more" \
    -DALLOCSCOPE_GO_CACHE="$(go_build_cache)" >/dev/null || return
  cmake --build "$BUILD" -j"$(nproc)"
}

# allocscope, its preload library and the demo workload only, optimized as
# the other builds (-O2) but without debug information, which took a third of
# the build's time (147 against 97 CPU seconds). `build` makes them again with it.
build_demo() {
  cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_FLAGS_RELEASE="-O2 -DNDEBUG" \
    -DCMAKE_C_FLAGS_RELEASE="-O2 -DNDEBUG" -DBUILD_TESTING=OFF -DALLOCSCOPE_TEST_HOOKS=OFF -DALLOCSCOPE_BENCH=OFF \
    >/dev/null || return
  cmake --build "$BUILD" -j"$(nproc)" --target allocscope allocscope_preload allocscope_man_pages alloc_sites leaky
}

# A command as root: directly when root, else through sudo.
as_root() {
  if [ "$(id -u)" -eq 0 ]; then "$@"; return; fi
  command -v sudo >/dev/null || {
    echo "dev.sh: $1 needs root (BPF); run this as root" >&2
    return 1
  }
  sudo "$@"
}

demo() {
  echo "dev.sh: recording the demo workload (build/tests/alloc_sites) into demo.pb.gz, demo.svg, demo.folded"
  as_root "$BUILD/allocscope" record -o demo.pb.gz -o demo.svg -o demo.folded -- "$BUILD/tests/alloc_sites" \
    --scale-pct 20
  [ "$(id -u)" -eq 0 ] || as_root chown "$(id -u):$(id -g)" demo.pb.gz demo.svg demo.folded
  echo
  "$BUILD/allocscope" report demo.pb.gz --top 10
  echo
  local su="" b
  b=$(realpath "$BUILD")  # said whole: the demo may have been run from elsewhere
  echo "dev.sh: open $PWD/demo.svg in a browser for the flame graph; 'go tool pprof $PWD/demo.pb.gz' also reads it"
  echo "dev.sh: installed, built and recorded in $SECONDS s"
  [ "$(id -u)" -eq 0 ] || su="sudo "
  echo
  echo "allocscope is $b/allocscope, not on PATH yet. Try:"
  echo "  $su$b/allocscope record -o heap.svg -- $b/tests/leaky --seconds 2"
  echo "  $su$b/allocscope record -p PID -d 10        # a running process, for 10 s"
  echo "  $b/allocscope record --help"
  echo "To install it with its man pages: ${su}cmake --install $b (under /usr/local),"
  echo "or as a Debian package: $PWD/dev.sh package, then ${su}apt install $PWD/dist/allocscope_*.deb"
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
  # Outputs written over a device once replaced the machine's /dev/null.
  if [ ! -c /dev/null ]; then
    echo "dev.sh: /dev/null is no longer a device: a test replaced it" >&2
    status=1
  fi
  if [ -n "${CI:-}" ] && grep -qE '\*\*\*Skipped|\[  SKIPPED \]' "$log"; then
    echo "dev.sh: tests were skipped on CI; they must run here" >&2
    status=1
  fi
  [ "$status" -eq 0 ] || note_failures "$dir" "$log"
  rm -f "$log"
  return "$status"
}

# Keeps, for the summary at the end of a run, which tests of build $1 failed
# and their assertions' first lines (from ctest's log $2): a CI log's tail is
# often all one gets to see.
FAILURES=$(mktemp)
trap 'rm -f "$FAILURES"' EXIT
note_failures() {
  {
    echo "in $1:"
    sed -n '/The following tests FAILED/,$p' "$2" | grep -E '^[[:space:]]+[0-9]+ - ' | head -20
    grep -E -A4 'Failure$|^[^ ]*: error: |Sanitizer|Expected|Which is|FAILED  \]' "$2" | head -60
  } >>"$FAILURES"
}

# The fast tier (dev.sh check): unit tests side by side (they touch no BPF
# and measure no time), then the integration tests one at a time, but for
# those that test endurance or repeat at length (the soaks, a compiler run in
# exact mode, every pyenv interpreter in process, a forgetting agent's churn,
# a retention timer's wait, twenty recordings' coverage): the full tier has
# them (the fast tier still records Debian's interpreter in process, and
# sampled estimates against their truth). JUnit files into
# $BUILD/check-*.xml (bench/flakes.py reads them). The sanitizers' stage
# runs the same set.
FAST_TIER_SKIPS='ChurnSoak|Exec\.ACompilerDriver|TransientCgroups\.|PythonLibraries\.PreloadCountsEveryPyenv'
FAST_TIER_SKIPS+='|Agent\.ExactModeForgetsEndedProcessesToo'
FAST_TIER_SKIPS+='|Retention\.AForgottenProgram|Estimates\.RepeatedRecordings'
check_tests() {
  local status=0
  run_tests "$BUILD" -L 'unit|style' -j"$(nproc)" --output-junit check-unit.xml || status=$?
  run_tests "$BUILD" -L integration -E "$FAST_TIER_SKIPS" --output-junit check-integration.xml || status=$?
  return "$status"
}

# The full tier's first stage: everything the build makes, unit tests side
# by side, the rest one at a time.
main() {
  local status=0
  build || return
  run_tests "$BUILD" -L 'unit|style' -j"$(nproc)" || status=$?
  [ -z "${BUILD_BESIDE_TESTS:-}" ] || start_sanitized_build
  run_tests "$BUILD" -LE 'unit|style' || status=$?
  return "$status"
}

# The full tier builds the sanitizers' tree at the lowest priority while the
# main stage's integration tests run: they wait on their targets far more
# than they compute (fast-tier rounds beside niced builds took 311-354 s
# against 307-323 alone, and none failed: docs/testing.md), so the build
# takes the cores they leave idle (2026-11-30: about 60 % of it was built
# by the time they ended; the main stage took 1,820 s against 1,609).
SANITIZED_BUILD_PID=
start_sanitized_build() {
  echo "dev.sh: building the sanitizers' tree beside the tests, niced (log: $BUILD-sanitize.log)"
  (renice -n 19 -p "$BASHPID" >/dev/null && ionice -c 3 -p "$BASHPID" && sanitized_build) >"$BUILD-sanitize.log" 2>&1 &
  SANITIZED_BUILD_PID=$!
}

# Waits for that build; it is made again (what remains of it, or all of it
# with its errors in the stage's log) by the sanitized stage.
wait_sanitized_build() {
  [ -n "$SANITIZED_BUILD_PID" ] || return 0
  wait "$SANITIZED_BUILD_PID" || echo "dev.sh: the sanitizers' build beside the tests failed; building it again"
  SANITIZED_BUILD_PID=
}

check() {
  local start=$SECONDS status=0 built
  build || return
  built=$SECONDS
  check_tests || status=$?
  echo "dev.sh: fast tier in $((SECONDS - start)) s (build $((built - start)) s, tests $((SECONDS - built)) s)"
  return "$status"
}

# The integration tests run under the sanitizers: one or a few of each
# suite, chosen for the code they reach (each way to record, the event
# paths, every output, the agent's server under load, Python and Go frames,
# injection, containers, signals, holds), not for their repeats (every
# interpreter, allocator, Go build, metric) or their waits (soaks, timers,
# entry cycles). ASan makes each two to three times slower: the fast tier's
# whole set took 12 of the stage's minutes (2026-12-02), this one about a
# third of that. A suite not named here runs unsanitized only. (No groups:
# CMake's regular expressions take at most nine.)
SANITIZER_TESTS='Record\.AttachToRunning|Record\.InterruptWrites|Record\.SeveralProcesses|Errors\.ClosedPipe'
SANITIZER_TESTS+='|Errors\.FullStandardOutput|Outputs\.PprofHoldsEveryMetric|Outputs\.ReportRebuilds'
SANITIZER_TESTS+='|Outputs\.IntervalSnapshots|Outputs\.DiffShowsTheSite|Outputs\.FlameGraphIsWell'
SANITIZER_TESTS+='|ReportFilters\.FocusKeeps|Metrics/ExactMode\.[^/]*/"inuse_space"'
SANITIZER_TESTS+='|Metrics/DefaultRate\.EverySiteIsUnbiased/"inuse|Probes\.SessionRuns|AllProcesses\.CgroupFilter'
SANITIZER_TESTS+='|AllProcesses\.CommFilter|AllProcesses\.PrivateCopy|AllProcesses\.AllocatorFilesProbed'
SANITIZER_TESTS+='|Allocators\.CxxOperatorsOfTcmallocAreTheLeafInProcess|InProcess\.SampledFreesCome'
SANITIZER_TESTS+='|InProcess\.AProgramOnAnother|InProcess\.ThirdPartyProviderIsRec|Inject\.ABorrowedThread'
SANITIZER_TESTS+='|Inject\.ProcessesItCannotEnter|Inject\.AProcessInAContainer|Inject\.AGoProgramWithout'
SANITIZER_TESTS+='|BusyEntry\.ABusy|BusyEntry\.AnEnded|Inject\.ALeftProcess|Inject/EnteredSites\.[^/]*/glibc|Inject/EnteredSites\.[^/]*/jemalloc'
SANITIZER_TESTS+='|AgentEntry\.|Launch\.ATreeIsSampled|Launch\.ExactModeSweeps|Children\.ForkedChild'
SANITIZER_TESTS+='|Exec\.AProgramWhoseExecEvent|Containers\.ProcessesOfAnOverlay'
SANITIZER_TESTS+='|Symbols\.|Unwind\.DwarfFindsFull|Unwind\.InlinedHelper|Unwind\.StacksLeadOutOfSignal'
SANITIZER_TESTS+='|DeepStacks\.FramePointerWalk|^Python\.ExactSitesStandUnder|^Python\.SampledSitesOfAnAttached|SampledSitesOfAnAttachedInterpreter/Python314'
SANITIZER_TESTS+='|PythonLibraries\.AProgramEmbedding|Go\.AStrippedProgramsGoFrames'
SANITIZER_TESTS+='|Go\.AttachingToARunningGo|GoHeap\.EachProgramsWay'
SANITIZER_TESTS+='|Agent\.SixtyFourScrapers|Agent\.StartupErrors|Check\.ThisMachineCanRecord'
SANITIZER_TESTS+='|Signals\.KilledRecorder|Signals/StopSignal\.[^/]*/INT|Estimates\.LifetimesTell'
SANITIZER_TESTS+='|FirstHour\.TheSummaryNames|HoldGuard|Unprivileged\.SampledSitesAreWithin'
SANITIZER_TESTS+='|Unprivileged\.AStopSignalLoses|Unprivileged\.StacksAreTheKernel|Retention\.EventsLeftAtTheEnd'
SANITIZER_TESTS+='|Identity\.|Modes/Confined\.[^/]*/"auto"'

# allocscope and its unit tests under ASan and UBSan, and the main tree's
# integration tests run against that allocscope. Any report, from any
# process, fails the stage, and so does a unit test's verdict. The
# integration tests run side by side for the sanitizers' reports only:
# their verdicts are the main stage's and the guests', at the product's speed (ASan makes allocscope 2-3 times slower:
# short-lived processes end before it reads them, holds pass their bounds,
# and its allocator is ASan's, which a preloaded tcmalloc then fights). The
# fast tier's set: the soaks and repeats reach no code the others do not,
# and took ten of the stage's minutes under ASan.
# Line tables only (-g1, what the reports' stacks need) at -O1, what ASan's
# authors advise: GCC's -O2 -g took 17 minutes on two cores, -O1 -g1 9.5
# (2026-12-02), so that most of it is built beside the main stage's tests. GCC, as the main build: clang removes the C++ workloads' unused
# new/delete pairs, so their sites vanish. No integration tests (the main
# tree's run); the Go programs' packages come from the shared Go cache.
sanitized_build() {
  # No -Werror: GCC 12 warns falsely (-Wrestrict) in code the sanitizers instrument.
  local go
  go=$(newer_go)
  cmake -S . -B "$BUILD-sanitize" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG" -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG" \
    -DALLOCSCOPE_SANITIZE=ON -DALLOCSCOPE_WERROR=OFF -DALLOCSCOPE_NEWER_GO="$go" -DALLOCSCOPE_INTEGRATION_TESTS=OFF \
    -DALLOCSCOPE_TEST_HOOKS=ON \
    -DALLOCSCOPE_GO_CACHE="$(go_build_cache)" >/dev/null || return
  cmake --build "$BUILD-sanitize" -j"$(nproc)"
}

sanitized() {
  wait_sanitized_build
  build || return  # the integration tests' (a no-op after the main stage)
  sanitized_build || return
  echo "dev.sh: unit tests under AddressSanitizer and UBSan"
  local reports status=0 log=$BUILD-sanitize/integration.log
  reports=$(mktemp -d)
  export ASAN_OPTIONS="detect_leaks=1:strict_string_checks=1:check_initialization_order=1:verify_asan_link_order=0:log_path=$reports/asan"
  export UBSAN_OPTIONS="print_stacktrace=1:log_path=$reports/ubsan"
  run_tests "$BUILD-sanitize" -L unit -j"$(nproc)" || status=$?  # side by side, as in main
  # As many at a time as there are cores: two at a time, each took 1.6 times
  # as long as alone (the stage a fifth shorter).
  echo "dev.sh: integration tests under the sanitizers, $(nproc) at a time, for their reports only (log: $log)"
  ALLOCSCOPE_TEST_BIN=$(realpath "$BUILD-sanitize/allocscope") ctest --test-dir "$BUILD" -L integration \
    -R "$SANITIZER_TESTS" -j"$(nproc)" >"$log" 2>&1 || true
  grep -E '^[0-9]+% tests passed' "$log" | sed 's/^/dev.sh: at sanitized pace (not counted): /' || true
  unset ASAN_OPTIONS UBSAN_OPTIONS
  if [ -n "$(ls -A "$reports")" ]; then
    echo "dev.sh: sanitizer reports:" >&2
    cat "$reports"/* >&2
    [ "$status" -ne 0 ] || status=1
  fi
  rm -rf "$reports"
  return "$status"
}

# The libFuzzer harnesses (tests/fuzz), each for FUZZ_SECONDS from its corpus:
# -O1 -g1 (a fifth less compile time than -O2 -g), assertions on.
fuzz() {
  CC=clang-16 CXX=clang++-16 cmake -S . -B "$BUILD-fuzz" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DALLOCSCOPE_FUZZ=ON \
    -DCMAKE_{C,CXX}_FLAGS_RELWITHDEBINFO="-O1 -g1" -DALLOCSCOPE_FUZZ_SECONDS="${FUZZ_SECONDS:-20}" >/dev/null || return
  cmake --build "$BUILD-fuzz" -j"$(nproc)" --target fuzz_pprof fuzz_text fuzz_elf fuzz_code || return
  echo "dev.sh: fuzzing each parser for ${FUZZ_SECONDS:-20} s"
  run_tests "$BUILD-fuzz" -L fuzz -j"$(nproc)"
}

# allocscope and its preload library built by Debian's other compiler
# (clang-16: clang 14, bookworm's default, lacks the C++23 std::expected
# needs), with assertions compiled in and every file compiled alone (the
# other builds compile each layer as unity translation units), warnings as
# errors. The main stage builds GCC's -O2, the package Debian's flags; the
# other build types (five more builds, 3 minutes each) never found anything
# these did not.
MATRIX=(clang/Debug)
matrix() {
  local entry compiler type dir cc cxx
  for entry in "${MATRIX[@]}"; do
    compiler=${entry%/*} type=${entry#*/} dir="$BUILD-matrix/${entry/\//-}"
    if [ "$compiler" = clang ]; then cc=clang-16 cxx=clang++-16; else cc=gcc cxx=g++; fi
    echo "dev.sh: building allocscope with $compiler, $type"
    CC=$cc CXX=$cxx cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE="$type" -DALLOCSCOPE_WERROR=ON \
      -DBUILD_TESTING=OFF -DALLOCSCOPE_UNITY=OFF >/dev/null || return
    cmake --build "$dir" -j"$(nproc)" --target allocscope allocscope_preload >"$dir/build.log" 2>&1 || {
      grep -E -m 40 'error|warning' "$dir/build.log" >&2 || tail -n 40 "$dir/build.log" >&2
      echo "dev.sh: the $compiler $type build failed; its log: $dir/build.log" >&2
      return 1
    }
    "$dir/allocscope" --version >/dev/null || return
  done
}

# The .deb as Debian's tools build it (packaging/debian), from a scratch copy
# of the work tree: uncommitted changes are in it, build trees are not. Into
# dist/, with its dbgsym, .buildinfo and .changes; any lintian error fails.
package() {
  local start=$SECONDS src status=0
  src=$(mktemp -d)
  mkdir -p "$src/allocscope" dist
  # Tracked and untracked files, not ignored ones; tracked files deleted from
  # the work tree are skipped.
  git ls-files -z -co --exclude-standard | tar -c --null -T - --ignore-failed-read -f - |
    tar -x -C "$src/allocscope" -f -
  mv "$src/allocscope/packaging/debian" "$src/allocscope/debian"
  # The copy has no .git: --version's revision comes from .git-revision
  # (packaging/version.cmake).
  local revision
  revision=$(git rev-parse --short=12 HEAD)
  [ -z "$(git status --porcelain --untracked-files=no)" ] || revision+=-dirty
  echo "$revision" >"$src/allocscope/.git-revision"
  echo "dev.sh: dpkg-buildpackage (log: dist/build.log)"
  (cd "$src/allocscope" && DEB_BUILD_OPTIONS="nocheck parallel=$(nproc)" dpkg-buildpackage -us -uc -b) \
    >dist/build.log 2>&1 || status=$?
  if [ "$status" -eq 0 ]; then
    rm -f dist/allocscope[-_]*
    find "$src" -maxdepth 1 -type f \( -name '*.deb' -o -name '*.ddeb' -o -name '*.buildinfo' -o -name '*.changes' \) \
      -exec cp -t dist {} +
  else
    tail -n 40 dist/build.log >&2
    echo "dev.sh: the package build failed; the whole log is dist/build.log" >&2
  fi
  rm -rf "$src"
  [ "$status" -eq 0 ] || return "$status"
  echo "dev.sh: built in $((SECONDS - start)) s:" dist/*.deb
  echo "dev.sh: lintian"
  lintian --profile debian --fail-on error dist/allocscope_*_amd64.changes
}

# The .deb built, checked by lintian, installed into a fresh bookworm root
# and used there.
package_test() {
  package && tests/package/install_test.sh dist/allocscope_*_amd64.deb
}

# allocscope on Debian's own kernels (6.1, 6.12 of bookworm and trixie, and
# bullseye's 5.10, which it must refuse), each booted under QEMU with real
# recordings inside (tests/kernels/matrix.sh; two guests at a time, kernels cached
# in ~/.cache/allocscope/kernels).
kernels() {
  build && tests/kernels/matrix.sh "$BUILD"
}

# Every stage runs; the first failure's status is returned, and the stages
# that failed are named last (a CI log's tail is often all one sees).
all_tests() {
  local status=0 stage failed=()
  BUILD_BESIDE_TESTS=1
  for stage in main kernels matrix package_test sanitized fuzz; do
    # The guests and the builds need every core.
    [ "$stage" != kernels ] || wait_sanitized_build
    local code=0 start=$SECONDS
    "$stage" || code=$?
    echo "dev.sh: stage $stage: $((SECONDS - start)) s"
    [ "$code" -eq 0 ] && continue
    failed+=("$stage (status $code)")
    [ "$status" -ne 0 ] || status=$code
  done
  if [ ${#failed[@]} -eq 0 ]; then
    echo "dev.sh: every stage passed"
  else
    echo "dev.sh: failed stages: ${failed[*]}"
    [ ! -s "$FAILURES" ] || { echo "dev.sh: what failed:"; cat "$FAILURES"; }
  fi
  [ ! -f "$BUILD/kernel-matrix.txt" ] || cat "$BUILD/kernel-matrix.txt"
  return "$status"
}

use_ccache
case "${1:-}" in
  demo)
    install_packages --lean "${BUILD_PACKAGES[@]}"
    echo "dev.sh: packages ready after $SECONDS s"
    build_demo
    echo "dev.sh: built after $SECONDS s"
    demo
    ;;
  check) install_deps; check ;;
  check-tests) check_tests ;;
  main) install_deps; main ;;
  test) install_deps; all_tests ;;
  deps) install_deps ;;
  build) require_build_packages; build ;;
  sanitize) install_deps; sanitized ;;
  fuzz) install_deps; fuzz ;;
  matrix) install_deps; matrix ;;
  kernels) install_deps; kernels ;;
  package) install_deps; package ;;
  package-test) install_deps; package_test ;;
  *) echo "usage: $0 demo|check|check-tests|main|test|deps|build|sanitize|fuzz|matrix|kernels|package|package-test" >&2; exit 2 ;;
esac
