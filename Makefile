# Tessera entry points. `make run` and `make test` install what is missing,
# build, and then run the main job / the whole test suite.
BUILD_DIR ?= build
JOBS ?= $(shell nproc)
CONFIG ?= configs/train/default.toml
NPROC ?= 8

# Sanitizer suites (.ci/run runs both after `make test`): every test under
# AddressSanitizer + UndefinedBehaviorSanitizer, and the tests whose ranks
# are threads (communication library, parallel runtime, trainer, tape) under
# ThreadSanitizer. Each has its own build tree; ccache shares compiles.
TSAN_TESTS ?= comm_test parallel_test train_test graph_test

.PHONY: deps configure build run test test-asan test-tsan bench clean

deps:
	@./scripts/install-deps.sh

configure: deps
	@if [ ! -f $(BUILD_DIR)/build.ninja ]; then cmake --preset release; fi

build: configure
	cmake --build $(BUILD_DIR) -j $(JOBS)

run: build
	$(BUILD_DIR)/bin/tessera launch --nproc $(NPROC) -- $(BUILD_DIR)/bin/tessera train $(CONFIG)

test: build
	cd $(BUILD_DIR) && ctest --output-on-failure -j $(JOBS)

test-asan: deps
	@if [ ! -f build-asan/build.ninja ]; then cmake --preset asan; fi
	cmake --build build-asan -j $(JOBS)
	cd build-asan && ctest --output-on-failure -j $(JOBS)

test-tsan: deps
	@if [ ! -f build-tsan/build.ninja ]; then cmake --preset tsan; fi
	cmake --build build-tsan -j $(JOBS) --target $(TSAN_TESTS)
	cd build-tsan && ctest --output-on-failure -j $(JOBS) -R '^($(subst $(eval) ,|,$(TSAN_TESTS)))$$'

bench: build
	./bench/run_all.sh

clean:
	rm -rf $(BUILD_DIR) build-asan build-tsan
