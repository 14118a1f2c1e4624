# Entry points: `make demo` sets up (missing Debian packages), configures, builds and runs the lab's main job,
# then YOLO26 detection on the sample images (annotated images and JSON under $(BUILD_DIR)/runs/detect);
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
	$(BUILD_DIR)/lab/lab detect --out $(BUILD_DIR)/runs/detect --json $(BUILD_DIR)/runs/detect/detections.json
	@echo "annotated sample images: $(BUILD_DIR)/runs/detect/, detections JSON: $(BUILD_DIR)/runs/detect/detections.json"

test: build
	ctest --test-dir $(BUILD_DIR) --output-on-failure -j2
