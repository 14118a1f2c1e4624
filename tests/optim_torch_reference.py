"""torch.optim on the problem the [optim][gpu] torch test writes (tests/test_optim_torch.cpp): Ultralytics'
three parameter groups (build_optimizer: biases first, then decayed weights, then norm weights), the
gradients of each step clipped with torch.nn.utils.clip_grad_norm_ and stepped by SGD (Nesterov) or AdamW.

Usage: optim_torch_reference.py DIR, with DIR/config.json, DIR/param.bin and DIR/grad<step>.bin (float32,
little-endian, the tensors back to back); writes DIR/out.bin, the weights after the last step.
"""
import json
import struct
import sys

import torch


def load(path):
    with open(path, "rb") as f:
        data = f.read()
    return torch.tensor(struct.unpack(f"<{len(data) // 4}f", data), dtype=torch.float32)


def main(folder):
    with open(f"{folder}/config.json") as f:
        cfg = json.load(f)
    counts, groups, lr = cfg["counts"], cfg["groups"], cfg["lr"]
    flat, params, offset = load(f"{folder}/param.bin"), [], 0
    for n in counts:
        params.append(torch.nn.Parameter(flat[offset:offset + n].clone()))
        offset += n
    by_group = [[p for p, g in zip(params, groups) if g == k] for k in range(3)]
    if cfg["optimizer"] == "SGD":
        opt = torch.optim.SGD(by_group[2], lr=lr[2], momentum=cfg["momentum"], nesterov=True)
    else:
        opt = torch.optim.AdamW(by_group[2], lr=lr[2], betas=(cfg["momentum"], 0.999), weight_decay=0.0)
    opt.add_param_group({"params": by_group[0], "weight_decay": cfg["weight_decay"], "lr": lr[0]})
    opt.add_param_group({"params": by_group[1], "weight_decay": 0.0, "lr": lr[1]})
    for step in range(cfg["steps"]):
        grad, offset = load(f"{folder}/grad{step}.bin"), 0
        for p, n in zip(params, counts):
            p.grad = grad[offset:offset + n].clone()
            offset += n
        torch.nn.utils.clip_grad_norm_(params, max_norm=cfg["max_norm"])
        opt.step()
    out = torch.cat([p.detach() for p in params]).tolist()
    with open(f"{folder}/out.bin", "wb") as f:
        f.write(struct.pack(f"<{len(out)}f", *out))


if __name__ == "__main__":
    main(sys.argv[1])
