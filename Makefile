# keyturn — the two commands of docs/contributing.md are `make dev` and `make test`; both install what is
# missing first (scripts/setup.sh is idempotent and skips what is already there).
.PHONY: dev serve test test-rust test-browser test-js build setup bench faults faults-long clean

build: setup
	bash keyturn-wasm/build.sh

setup:
	bash scripts/setup.sh

# Everything (tests/README.md says what each part holds). Run one part with test-rust (lint, docs,
# native tests), test-browser (the wasm tests in Node, Chromium and Firefox) or test-js (the
# package's JS tests, workerd, the Rust worker, the types); MATCH=<pattern> runs only the tests
# whose name matches, FILES=<paths> only those JS test files, JS_JOBS=<n> how many JS files run
# at once (3).
test: build
	bash scripts/test.sh all

test-rust: setup
	bash scripts/test.sh rust

test-browser: setup
	bash scripts/test.sh browser

test-js: build
	bash scripts/test.sh js

# The example worker (worker/, wrangler.toml) on 127.0.0.1:8787, offline: Durable Objects and
# R2 simulated locally by wrangler's workerd. See the README for curl commands. `serve` is the same
# without the build (tests/js/dev-exports.test.mjs runs it with PORT and VARS, e.g.
# VARS="--var UPSTREAM_URL:http://127.0.0.1:9000").
PORT ?= 8787
dev: build
	$(MAKE) --no-print-directory serve

serve:
	WRANGLER_SEND_METRICS=false WRANGLER_SEND_ERROR_REPORTS=false CLOUDFLARE_CF_FETCH_ENABLED=false \
	  node_modules/.bin/wrangler dev --local --ip 127.0.0.1 --port $(PORT) $(VARS)

# The fault harness (faults/README.md) over redis-server, workerd's Durable Objects and
# postgresql: the short profile (about 5 minutes; CI runs it after `make test`) with its
# self-test — planted bugs must be found — and the long profile, whose table is docs/faults.md's.
faults: build
	node faults/profiles.mjs short

faults-long: build
	node faults/profiles.mjs long

bench: build
	node bench/serializer.mjs
	node bench/coalescing.mjs
	node bench/concurrency.mjs
	node bench/pace.mjs
	node bench/pace-across.mjs
	node bench/semaphore.mjs
	node bench/workerd.mjs
	node bench/lock.mjs
	node bench/cross-isolate.mjs
	node bench/stores.mjs
	node bench/stores-sqlite.mjs
	node bench/stores-dynamodb.mjs
	node bench/serializer-store.mjs
	node bench/claims.mjs
	node bench/cold-start.mjs

clean:
	rm -rf pkg target node_modules
