# Entry points: `make demo` sets up (missing Debian packages), configures, builds and runs the lab's main job;
# `make test` does the same set-up and build, then runs every test (GPU tests skip themselves without a GPU).
BUILD_DIR ?= build
JOBS ?= $(shell nproc)

.PHONY: all deps configure build demo test

all: build

deps:
	bash scripts/install-deps.sh

configure: deps
	cmake -S . -B $(BUILD_DIR) -G Ninja

build: configure
	cmake --build $(BUILD_DIR) -j $(JOBS)

demo: build
	$(BUILD_DIR)/lab/lab demo

test: build
	ctest --test-dir $(BUILD_DIR) --output-on-failure -j2
