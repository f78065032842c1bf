#!/usr/bin/env bash
# Installs what the build and the tests need, skipping what is already there at the right
# version. Safe to run any number of times; `make dev` and `make test` run it first.
set -euo pipefail
cd "$(dirname "$0")/.."

say() { printf 'setup: %s\n' "$*"; }

# Rust's wasm target.
if ! rustup target list --installed | grep -qx wasm32-unknown-unknown; then
  say "adding the wasm32-unknown-unknown target"
  rustup target add wasm32-unknown-unknown
fi

# wasm-bindgen-cli at exactly the version Cargo.lock pins (the CLI refuses any other).
want=$(awk '/^name = "wasm-bindgen"$/ { getline; gsub(/version = |"/, ""); print; exit }' Cargo.lock)
have=$(wasm-bindgen --version 2>/dev/null | awk '{ print $2 }' || true)
if [ "$have" != "$want" ]; then
  say "installing wasm-bindgen-cli $want (have: ${have:-none})"
  # --locked fails for some versions whose pinned dependency left the registry.
  cargo install wasm-bindgen-cli --version "$want" --locked || cargo install wasm-bindgen-cli --version "$want"
fi

# wasm-snip, which the build uses to cut the panic machinery out of the wasm modules.
WASM_SNIP_VERSION=0.4.0
if [ "$(wasm-snip --version 2>/dev/null | awk '{ print $2 }' || true)" != "$WASM_SNIP_VERSION" ]; then
  say "installing wasm-snip $WASM_SNIP_VERSION"
  cargo install wasm-snip --version "$WASM_SNIP_VERSION" --locked
fi

# Browsers and their drivers for the wasm tests, Redis and PostgreSQL for the store tests: Debian's
# packages; geckodriver from crates.io.
missing=()
command -v chromium >/dev/null || missing+=(chromium)
command -v chromedriver >/dev/null || missing+=(chromium-driver)
command -v firefox >/dev/null || missing+=(firefox-esr)
command -v redis-server >/dev/null || missing+=(redis-server) # the Redis store's tests
compgen -G '/usr/lib/postgresql/*/bin/postgres' >/dev/null || missing+=(postgresql) # PostgresStore's tests
if [ ${#missing[@]} -gt 0 ]; then
  say "installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq "${missing[@]}" >/dev/null
fi
if ! command -v geckodriver >/dev/null; then
  say "installing geckodriver"
  cargo install geckodriver --locked
fi

# worker-build, for the Rust worker example (examples/rust-worker), at the version its Cargo.toml's
# `worker` pins. It downloads esbuild, wasm-opt and wasm-bindgen unless told where they are:
# scripts/test.sh gives it this machine's (wasm-bindgen from cargo, the others from npm).
WORKER_BUILD_VERSION=0.8.7
if [ "$(worker-build --version 2>/dev/null | grep -oE '[0-9]+\.[0-9]+\.[0-9]+' | head -1)" != "$WORKER_BUILD_VERSION" ]; then
  say "installing worker-build $WORKER_BUILD_VERSION"
  cargo install worker-build --version "$WORKER_BUILD_VERSION" --locked
fi

# Node dev dependencies (wasm-opt from npm's binaryen, esbuild, typescript, miniflare and
# wrangler for workerd, the clients and local engines of the store tests), as the lock says.
if [ ! -f node_modules/.package-lock.json ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  say "installing node dev dependencies"
  npm ci --no-audit --no-fund --loglevel=error
fi
