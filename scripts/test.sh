#!/usr/bin/env bash
# The tests, in parts: `scripts/test.sh [all|rust|browser|js]` (make test, test-rust, test-browser,
# test-js). `js` and `all` expect a fresh pkg/ (make build). MATCH narrows to the tests whose
# name matches (cargo test's filter; node's --test-name-pattern), FILES to some JS test files.
# Fails on the first error.
set -euo pipefail
cd "$(dirname "$0")/.."
# The wasm test runner picks its browser from these: exactly one per run, set below.
unset CHROMEDRIVER GECKODRIVER WASM_BINDGEN_USE_BROWSER
part="${1:-all}"
match="${MATCH:-}"

step() { printf '\n== %s\n' "$*"; }

rust() {
  step "lint: rustfmt, clippy (the keyturn crate native and on wasm32, the package's bindings on wasm32)"
  cargo fmt --all --check
  cargo clippy --quiet --all-targets -- -D warnings
  cargo clippy --quiet --all-targets --target wasm32-unknown-unknown -- -D warnings
  cargo clippy --quiet -p keyturn-wasm --all-targets -- -D warnings
  cargo clippy --quiet -p keyturn-wasm --lib --all-features --target wasm32-unknown-unknown -- -D warnings

  step "crate hygiene: docs without warnings, the crate package holds only the crate, no exact pin for its users"
  RUSTDOCFLAGS="-D warnings" cargo doc --no-deps --quiet
  unexpected="$(cargo package -p keyturn --list --allow-dirty --quiet 2>/dev/null \
    | grep -vE '^(src/.*\.rs|tests/[a-z_]+\.(rs|json)|tests/common/mod\.rs|Cargo\.(toml|toml\.orig|lock)|README\.md|CHANGELOG\.md|LICENSE-(MIT|APACHE)|\.cargo_vcs_info\.json)$' || true)"
  if [ -n "$unexpected" ]; then echo "cargo package would ship: $unexpected"; exit 1; fi
  # What a Rust program that depends on keyturn is made to take: caret requirements only (the
  # exact wasm-bindgen pin is the npm package's crate's, for its CLI).
  pinned="$(cargo metadata --format-version 1 --no-deps | node -e '
    const { packages } = JSON.parse(require("fs").readFileSync(0, "utf8"));
    const keyturn = packages.find((p) => p.name === "keyturn");
    for (const d of keyturn.dependencies) if (d.kind !== "dev" && d.req.startsWith("=")) console.log(d.name, d.req);')"
  if [ -n "$pinned" ]; then echo "keyturn pins for its users: $pinned"; exit 1; fi
  echo "crate package: ok"

  step "native Rust tests, doctests included (the keyturn crate, and the bindings' conversions)"
  cargo test --quiet -- $match
  cargo test --quiet -p keyturn-wasm -- $match
}

browser() {
  # One build, then the three runs side by side: each waits mostly on its runtime's start-up. Each
  # run's output is shown whole once all three ended; any failure fails the part.
  step "wasm tests: built once, then run in Node, headless Chromium and headless Firefox at once"
  cargo test --target wasm32-unknown-unknown --tests --no-run
  local logs name failed=""
  logs="$(mktemp -d)"
  wasm_tests() { # <log name> [VAR=value ...]
    local log="$logs/$1"
    shift
    (env "$@" cargo test --target wasm32-unknown-unknown --tests -- $match >"$log" 2>&1 && echo 0 >"$log.status" || echo 1 >"$log.status") &
  }
  wasm_tests Node
  wasm_tests "headless Chromium" WASM_BINDGEN_USE_BROWSER=1 CHROMEDRIVER="$(command -v chromedriver)"
  wasm_tests "headless Firefox" WASM_BINDGEN_USE_BROWSER=1 GECKODRIVER="$(command -v geckodriver)"
  wait
  for name in Node "headless Chromium" "headless Firefox"; do
    step "wasm tests in $name"
    cat "$logs/$name"
    [ "$(cat "$logs/$name.status")" = 0 ] || failed="$failed, $name"
  done
  rm -rf "$logs"
  if [ -n "$failed" ]; then echo "wasm tests failed in ${failed#, }"; return 1; fi
}

js() {
  step "the Rust worker example (workers-rs), built by worker-build with this machine's tools"
  (cd examples/rust-worker && ESBUILD_BIN="$PWD/../../node_modules/.bin/esbuild" \
    WASM_OPT_BIN="$PWD/../../node_modules/.bin/wasm-opt" WASM_BINDGEN_BIN="$(command -v wasm-bindgen)" \
    worker-build --release)

  # A test that hangs (a promise a bug leaves pending while a timer keeps the process alive)
  # fails its file after this long instead of holding CI to its limit. JS_JOBS files run at once
  # (default 3): most of a file's time is spent waiting on a server, a browser or a timer.
  step "JS tests against pkg/ (node's test runner, ${JS_JOBS:-3} files at a time), and workerd through Miniflare"
  # shellcheck disable=SC2086 # FILES is a list of paths
  node --expose-gc --test --test-concurrency="${JS_JOBS:-3}" --test-timeout=600000 ${match:+--test-name-pattern="$match"} ${FILES:-tests/js/}

  step "TypeScript: the types of pkg/ as a consumer uses them, and the package's JS by its JSDoc types"
  node_modules/.bin/tsc -p tests/types
  node_modules/.bin/tsc -p keyturn-wasm
  echo "types check: ok"
}

case "$part" in
  rust) rust ;;
  browser) browser ;;
  js) js ;;
  all)
    rust
    browser
    js
    ;;
  *)
    echo "usage: scripts/test.sh [all|rust|browser|js]" >&2
    exit 2
    ;;
esac
