#!/usr/bin/env python3
"""Loads a state-dict .pt written by `lab` with real torch (torch.load(weights_only=True)) and compares every
tensor, bit for bit, with a safetensors twin (read with tests/check_pt_structure.py's stdlib reader).

Usage: scripts/check-pt-with-torch.py FILE.pt TWIN.safetensors
  e.g. lab train ... writes runs/train/NAME/weights/last.pt and last.safetensors side by side.
Prints "torch <version>: N tensors equal, nc N, names [...]" and exits 0, or one line and exits 1.
(The CPU tests check the same structure without torch: tests/check_pt_structure.py.)
"""
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
from check_pt_structure import read_safetensors  # noqa: E402 (the stdlib reader the CPU tests use)

DTYPES = {"F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16, "F64": torch.float64}


def twin_tensors(path):
    """The safetensors file's tensors as torch tensors (its bytes read by the stdlib checker's reader)."""
    tensors = {}
    for key, (dtype_name, shape, data) in read_safetensors(path).items():
        dtype = DTYPES[dtype_name]
        flat = torch.frombuffer(bytearray(data), dtype=dtype) if data else torch.empty(0, dtype=dtype)
        tensors[key] = flat.reshape(shape)
    return tensors


def main():
    if len(sys.argv) != 3:
        print(__doc__)
        return 2
    path, twin_path = sys.argv[1], sys.argv[2]
    checkpoint = torch.load(path, weights_only=True, map_location="cpu")
    state, twin = checkpoint["model"], twin_tensors(twin_path)
    counters = {key for key in state if key.endswith(".num_batches_tracked")}  # int64 0s, not in the twin
    if set(state) - counters != set(twin):
        print(f"{path}: keys differ from {twin_path}: {sorted((set(state) - counters) ^ set(twin))[:5]}")
        return 1
    for key in counters:
        if state[key].dtype != torch.int64 or state[key].shape != () or state[key].item() != 0:
            print(f"{path}: '{key}' is not an int64 scalar 0")
            return 1
    for key, tensor in state.items():
        if key in counters:
            continue
        other = twin[key]
        same = tensor.dtype == other.dtype and tensor.shape == other.shape and torch.equal(
            tensor.flatten().view(torch.uint8), other.flatten().view(torch.uint8))  # bit for bit
        if not same:
            print(f"{path}: '{key}' {tensor.dtype} {tuple(tensor.shape)} differs from the twin's "
                  f"{other.dtype} {tuple(other.shape)}")
            return 1
    names = checkpoint["names"]
    if checkpoint["nc"] != len(names) or sorted(names) != list(range(len(names))):
        print(f"{path}: nc {checkpoint['nc']} does not number names {names}")
        return 1
    print(f"torch {torch.__version__}: {len(state) - len(counters)} tensors equal (+{len(counters)} BatchNorm "
          f"counters), nc {checkpoint['nc']}, "
          f"names {list(names.values())[:5]}{'...' if len(names) > 5 else ''}, epoch {checkpoint['epoch']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
