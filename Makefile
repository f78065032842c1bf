# keyturn — the two commands of the README are `make dev` and `make test`; both install what is
# missing first (scripts/setup.sh is idempotent and skips what is already there).
.PHONY: dev test build setup bench clean

build: setup
	bash scripts/build.sh

setup:
	bash scripts/setup.sh

test: build
	bash scripts/test.sh

# Until the example worker lands (issue 4), `make dev` builds the package into pkg/, ready to
# import as 'keyturn'.
dev: build
	@echo "pkg/ is built: import 'keyturn' from it (see README)."

bench: build
	node bench/serializer.mjs
	node bench/lock.mjs

clean:
	rm -rf pkg target node_modules
