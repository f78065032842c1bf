# keyturn — the two commands of the README are `make dev` and `make test`; both install what is
# missing first (scripts/setup.sh is idempotent and skips what is already there).
.PHONY: dev test build setup bench clean

build: setup
	bash scripts/build.sh

setup:
	bash scripts/setup.sh

test: build
	bash scripts/test.sh

# The example worker (worker/, wrangler.toml) on 127.0.0.1:8787, offline: Durable Objects and
# R2 simulated locally by wrangler's workerd. See the README for curl commands.
dev: build
	WRANGLER_SEND_METRICS=false WRANGLER_SEND_ERROR_REPORTS=false CLOUDFLARE_CF_FETCH_ENABLED=false \
	  node_modules/.bin/wrangler dev --local --ip 127.0.0.1 --port 8787

bench: build
	node bench/serializer.mjs
	node bench/workerd.mjs
	node bench/lock.mjs
	node bench/stores.mjs
	node bench/serializer-store.mjs
	node bench/claims.mjs
	node bench/cold-start.mjs

clean:
	rm -rf pkg target node_modules
