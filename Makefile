# keyturn — the two commands of the README are `make dev` and `make test`; both install what is
# missing first (scripts/setup.sh is idempotent and skips what is already there).
.PHONY: dev test build setup bench test-native test-wasm test-js clean

build: setup
	bash scripts/build.sh

setup:
	bash scripts/setup.sh

test: build
	bash scripts/test.sh

# Until the example worker lands (issue 4), `make dev` builds the package and runs its tests'
# JS half against it in watch-free mode, so the package is ready to import from pkg/.
dev: build
	@echo "pkg/ is built: import 'keyturn' from it (see README)."

bench: build
	node bench/serializer.mjs

clean:
	rm -rf pkg target node_modules
