#!/usr/bin/env bash
# Builds the npm package into pkg/ (at the repository's top): this crate's two wasm modules,
# wasm-bindgen (web target), wasm-opt -Oz, the static JS from js/, the constants, and a CommonJS
# bundle for `require`. pkg/ is generated: never edit it.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cd "$here/.."

rm -rf pkg
mkdir pkg
# One wasm module per binding: the serializer's (keyturn_wasm), and the lock's (keyturn_lock,
# loaded on first use). Both are built for speed (rustc opt-level 2), then shrunk by wasm-opt
# -Oz: at opt-level z the lock's acquire+release was slower by more than a user would trade for
# its smaller size (docs/design.md), and both modules came out larger gzipped. Both inline less
# than opt-level 2 does by default (a threshold of 75 instead of 225): the lock's 1.6 KB less
# for 3 % more of a lock cycle's time in the wasm; the serializer's (opt-level 3 before) 1 KB
# less gzipped at the same time in the wasm per work, its hot helpers marked #[inline]
# (bench/README.md).
for module in wasm:serializer:2:-inline-threshold=75 lock:lock:2:-inline-threshold=75; do
  IFS=: read -r name feature level llvm <<<"$module"
  RUSTFLAGS="${llvm:+-C llvm-args=$llvm}" CARGO_PROFILE_RELEASE_OPT_LEVEL=$level cargo build --quiet --lib --release \
    -p keyturn-wasm --target wasm32-unknown-unknown --features "$feature" --target-dir "target/$name"
  # A panic traps the module whatever std's panic handler does first (panic = "abort"), and on
  # wasm32-unknown-unknown what it does first is format a message nobody sees: its body is
  # replaced by the trap, and wasm-opt then drops the formatting code only it reached.
  wasm=target/$name/wasm32-unknown-unknown/release/keyturn_wasm
  wasm-snip --snip-rust-panicking-code "$wasm.wasm" -o "$wasm.snipped.wasm"
  # The reset-state function lets the package's JS make a fresh instance after a trap.
  wasm-bindgen --target web --experimental-reset-state-function --out-dir pkg --out-name "keyturn_$name" \
    "$wasm.snipped.wasm"
  # The features rustc enables by default for wasm32-unknown-unknown; wasm-opt must keep them.
  node_modules/.bin/wasm-opt -Oz --converge --strip-debug --strip-producers --strip-target-features \
    --enable-bulk-memory --enable-mutable-globals --enable-nontrapping-float-to-int \
    --enable-sign-ext --enable-reference-types --enable-multivalue \
    "pkg/keyturn_${name}_bg.wasm" -o "pkg/keyturn_${name}_bg.wasm"
done
js=keyturn-wasm/js
cp "$js"/api.js "$js"/platform.js "$js"/engine.js "$js"/serializer.js "$js"/coalescing.js "$js"/lock.js \
  "$js"/arguments.js "$js"/errors.js "$js"/instance.js "$js"/timers.js "$js"/tracing.js "$js"/browser.js "$js"/workerd.js "$js"/deno.js "$js"/edge-light.js \
  "$js"/node.mjs "$js"/index.d.ts "$js"/package.json CHANGELOG.md LICENSE-MIT LICENSE-APACHE pkg/
cp -r "$js"/stores pkg/
# The package's README is the repository's, without what only the repository has.
sed '/<!-- repository-only -->/,/<!-- \/repository-only -->/d' README.md > pkg/README.md
# Its docs/ pages too, for the README's links; how it is built and how to work on it stay here.
rm -rf pkg/docs && mkdir pkg/docs
for page in docs/*.md; do
  case "$page" in docs/design.md | docs/contributing.md) continue ;; esac
  sed '/<!-- repository-only -->/,/<!-- \/repository-only -->/d' "$page" > "pkg/$page"
done
# The same types for `require` under TypeScript's node16/nodenext resolution: a `.d.ts` in this
# `"type": "module"` package describes an ES module, which a CommonJS consumer may not import.
cp "$js"/index.d.ts pkg/index.d.cts
# Constants, codes and message templates, from their one source: Rust.
cargo run --quiet -p keyturn-wasm --bin constants > pkg/constants.js
# `require` on Node < 22 cannot load ES modules, so the CommonJS entry is one bundle of the same
# sources (the glue's import.meta is only used by the async init path, which it never takes).
cp "$js"/node.cjs.src.mjs pkg/.node.cjs.src.mjs
node_modules/.bin/esbuild pkg/.node.cjs.src.mjs --bundle --format=cjs --platform=node \
  --log-level=warning --log-override:empty-import-meta=silent --outfile=pkg/node.cjs
rm pkg/.node.cjs.src.mjs
# The ESM entry for Node is one bundle too (its cold start is mostly the loader's work per module).
mv pkg/node.mjs pkg/.node.src.mjs
node_modules/.bin/esbuild pkg/.node.src.mjs --bundle --format=esm --platform=node --log-level=warning \
  --outfile=pkg/node.mjs
rm pkg/.node.src.mjs
# Tests and benchmarks import the package by name, as users do.
mkdir -p node_modules
ln -sfn ../pkg node_modules/keyturn
