#!/usr/bin/env bash
# The fault harness's planted bugs built into the package (faults/README.md): a copy of pkg/
# whose lock module — which serializers over a store run on too — is built from the same sources
# with `--cfg keyturn_planted="<value>"`: `record-fences` (the default; `fences`) takes fences
# from the record alone, as before fences followed the clock (src/engine/leases.rs);
# `pace-limit` (`pace`) lets one start too many through a paced key's window
# (src/engine/starts.rs). The JS is pkg/'s; only the lock's wasm differs, and its bindings must be
# the same (checked).
#
#   bash faults/planted-fences.sh <out dir> [record-fences|pace-limit]     (expects a fresh pkg/: make build)
set -euo pipefail
out="$1"
planted="${2:-record-fences}"
cd "$(dirname "$0")/.."
RUSTFLAGS="--cfg keyturn_planted=\"$planted\" -C llvm-args=-inline-threshold=75" \
  CARGO_PROFILE_RELEASE_OPT_LEVEL=2 cargo build --quiet --lib --release -p keyturn-wasm \
  --target wasm32-unknown-unknown --features lock --target-dir "target/planted-$planted"
wasm="target/planted-$planted/wasm32-unknown-unknown/release/keyturn_wasm"
# Snipped into a directory of its own: two runs may build the same planted package at once (cargo
# takes turns on the target directory; what follows it must not share a file).
glue="$(mktemp -d)"
trap 'rm -rf "$glue"' EXIT
wasm-snip --snip-rust-panicking-code "$wasm.wasm" -o "$glue/snipped.wasm"
wasm-bindgen --target web --experimental-reset-state-function --out-dir "$glue" --out-name keyturn_lock \
  "$glue/snipped.wasm"
cmp -s "$glue/keyturn_lock.js" pkg/keyturn_lock.js || { echo "planted-fences: the lock's bindings differ from pkg/'s" >&2; exit 1; }
rm -rf "$out"
cp -r pkg "$out"
cp "$glue/keyturn_lock_bg.wasm" "$out/keyturn_lock_bg.wasm"
