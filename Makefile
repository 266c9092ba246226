# Tessera entry points. `make run` and `make test` install what is missing,
# build, and then run the main job / the whole test suite.
BUILD_DIR ?= build
JOBS ?= $(shell nproc)
CONFIG ?= configs/train/default.toml
NPROC ?= 8

.PHONY: deps configure build run test bench clean

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

bench: build
	./bench/run_all.sh

clean:
	rm -rf $(BUILD_DIR)
