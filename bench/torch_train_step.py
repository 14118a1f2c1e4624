#!/usr/bin/env python3
"""One YOLO26 training iteration in PyTorch beside `lab bench train-step`, on the same GPU in the same run
(issue 20's comparison; docs/training.md, "The PyTorch iteration beside ours").

The network is yolo26_torch.py's build_train_model from the same weights as compare_torch.py (the safetensors
that `lab convert` writes): Conv + BatchNorm2d in eval mode (frozen statistics, as ours), both heads, the
one-to-one head on detached features, attention through scaled_dot_product_attention. The loss is
yolo26_loss_torch.py's E2ELoss (spec/yolo26.md, dense on the GPU), the optimizer Ultralytics' three groups
(yolo26_train_torch.py). First the checks of torch_train_golden.py on bus.jpg (exit 1 on a miss); then one
iteration = the batch's upload (8-bit images and labels from host memory, the images then divided by 255 on the
GPU, as Ultralytics' trainer and `lab bench train-step` do), zero_grad, forward, loss, backward, clip at 10, optimizer step, timed with CUDA events (median of
warm iterations) at each batch size, optimizer and precision: fp32 (TF32 off), tf32 (cuDNN and matmul TF32
on), amp (float16 autocast + GradScaler, PyTorch's default TF32 settings, as `yolo train` runs), and with
--compile MODE the forward and loss through torch.compile(mode=MODE) as well. The batch is seeded random images
with --boxes seeded boxes per image (sides 1/8 to 1/2 of the image, classes in turn), the distribution of
`lab bench train-step`'s synthetic batch; learning rate 1e-4 as there. With --lab LAB --model M it runs `lab
bench train-step --json` at the same batch sizes, optimizers and precisions fp32 and fp16 (a precision the lab
binary refuses prints its error line) and prints the side-by-side table with the ratios.

Usage: python3 bench/torch_train_step.py --weights yolo26n.safetensors --goldens shared/assets/goldens
       [--lab build/lab/lab --model yolo26n.pt] [--batches 32,1] [--optimizers SGD,AdamW]
       [--precisions fp32,tf32,amp] [--compile max-autotune-no-cudagraphs|reduce-overhead] [--boxes 4]
       [--imgsz 640] [--warmup 5] [--reps 20]
"""
import argparse
import os
import sys

from compare_torch import run_lab_json  # `lab ... --json` as a subprocess, shared with the inference comparison
from sdpa_compare import time_ms  # CUDA-event median over warm runs

PRECISIONS = ("fp32", "tf32", "amp")
LAB_PRECISIONS = ("fp32", "fp16")
LR = 1e-4  # as `lab bench train-step`: the timed iterations stay near the checkpoint


def synthetic_batch(torch, batch, imgsz, boxes, classes, seed):
    """Host tensors: images [B, 3, S, S] uint8, classes [B, G], xyxy pixels [B, G, 4], mask [B, G]."""
    gen = torch.Generator().manual_seed(seed)
    images = torch.randint(0, 256, (batch, 3, imgsz, imgsz), generator=gen, dtype=torch.uint8)
    r = torch.rand(batch, boxes, 4, generator=gen)
    w, h = imgsz * (0.125 + 0.375 * r[..., 0]), imgsz * (0.125 + 0.375 * r[..., 1])
    x, y = (imgsz - w) * r[..., 2], (imgsz - h) * r[..., 3]
    cls = torch.arange(batch * boxes).view(batch, boxes) % classes
    return images, cls, torch.stack((x, y, x + w, y + h), -1), torch.ones(batch, boxes, dtype=torch.bool)


def set_precision(torch, precision):
    """TF32 switches for a row: fp32 off, tf32 on, amp PyTorch's defaults (cuDNN on, matmul off)."""
    torch.backends.cudnn.allow_tf32 = precision != "fp32"
    torch.backends.cuda.matmul.allow_tf32 = precision == "tf32"


def time_iteration(torch, sd, host_batch, optimizer, precision, compile_mode, args, dev):
    """(median ms of one iteration, the last loss) for a fresh model from `sd`."""
    from yolo26_loss_torch import E2ELoss
    from yolo26_torch import build_train_model
    from yolo26_train_torch import TrainStep

    set_precision(torch, precision)
    model = build_train_model(sd).to(dev).eval()
    loss = E2ELoss((args.imgsz, args.imgsz), dev)

    def forward(images, *labels):
        return loss(model(images), *labels)

    if compile_mode:
        forward = torch.compile(forward, mode=compile_mode)
    step = TrainStep(model, forward, optimizer, LR, amp=precision == "amp")
    last = []

    def iteration():
        if compile_mode == "reduce-overhead":
            torch.compiler.cudagraph_mark_step_begin()  # a new iteration: the graphs' last outputs are done
        images, *labels = (t.to(dev) for t in host_batch)
        last[:] = [step(images.float() / 255, *labels)]

    ms = time_ms(torch, iteration, args.warmup, args.reps)
    return ms, last[0].item()


def lab_train_step(args, batch, optimizer, precision):
    """(iteration ms, None) from `lab bench train-step --json`, or (None, its last error line)."""
    cmd = [args.lab, "bench", "train-step", "--model", args.model, "--batch", str(batch), "--imgsz",
           str(args.imgsz), "--optimizer", optimizer, "--precision", precision, "--iters", str(args.reps), "--json"]
    result, err = run_lab_json(cmd)
    return (result["iteration_ms"], None) if result else (None, " ".join(err))


def print_table(rows, labs, args):
    """Markdown rows: PyTorch's precisions, the lab's, images/s of the best of each and their ratio."""
    torch_cols = [p for p in PRECISIONS if p in args.precisions] + (["amp compiled"] if args.compile else [])
    lab_cols = list(LAB_PRECISIONS) if args.lab else []
    print(f"\none iteration at {args.imgsz}x{args.imgsz}, ms (median of {args.reps}); same GPU, same run:")
    head = ["batch", "optimizer"] + [f"PyTorch {c}" for c in torch_cols] + [f"lab {c}" for c in lab_cols]
    if lab_cols:
        head += ["best PyTorch / best lab"]
    print("| " + " | ".join(head) + " |\n|" + " --- |" * len(head))
    for batch in args.batches:
        for optimizer in args.optimizers:
            theirs = {c: rows.get((batch, optimizer, c)) for c in torch_cols}
            ours = {c: labs.get((batch, optimizer, c)) for c in lab_cols}
            cells = [str(batch), optimizer]
            cells += [f"{v:.2f} ({batch * 1e3 / v:.0f} img/s)" if v else "-" for v in theirs.values()]
            cells += [f"{v:.2f} ({batch * 1e3 / v:.0f} img/s)" if isinstance(v, float) else f"failed: {v}"
                      for v in ours.values()]
            best_theirs = min((v for v in theirs.values() if v), default=None)
            best_ours = min((v for v in ours.values() if isinstance(v, float)), default=None)
            if lab_cols:
                cells.append(f"{best_theirs / best_ours:.2f}x" if best_theirs and best_ours else "-")
            print("| " + " | ".join(cells) + " |")


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--weights", required=True, help="safetensors from `lab convert yolo26n.pt OUT.safetensors`")
    ap.add_argument("--goldens", required=True, help="the folder of bus640_golden_0.safetensors, bus_loss.json, "
                    "bus_train_golden.json and .safetensors (shared/assets/goldens)")
    ap.add_argument("--lab", help="the lab binary: also run `lab bench train-step` (needs --model)")
    ap.add_argument("--model", help="the checkpoint for `lab bench train-step`")
    ap.add_argument("--batches", default="32,1", help="comma-separated batch sizes")
    ap.add_argument("--optimizers", default="SGD,AdamW", help="comma-separated: SGD, AdamW")
    ap.add_argument("--precisions", default=",".join(PRECISIONS), help="comma-separated: fp32, tf32, amp")
    ap.add_argument("--compile", metavar="MODE", choices=("max-autotune-no-cudagraphs", "reduce-overhead"),
                    help="also time the amp iteration with the forward and loss through torch.compile(mode=MODE)")
    ap.add_argument("--boxes", type=int, default=4, help="boxes per synthetic image (lab's batch has 4)")
    ap.add_argument("--imgsz", type=int, default=640)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    try:
        args.batches = [int(b) for b in args.batches.split(",")]
    except ValueError:
        ap.error(f"--batches {args.batches}: comma-separated integers")
    args.optimizers = args.optimizers.split(",")
    args.precisions = args.precisions.split(",")
    for name, values, allowed in (("--optimizers", args.optimizers, ("SGD", "AdamW")),
                                  ("--precisions", args.precisions, PRECISIONS)):
        if not set(values) <= set(allowed):
            ap.error(f"{name} {','.join(values)}: each one of {', '.join(allowed)}")
    if min(args.batches) < 1 or args.boxes < 1 or args.imgsz % 32 or args.reps < 1 or args.warmup < 0:
        ap.error("--batches and --boxes at least 1, --imgsz a multiple of 32, --reps at least 1, --warmup >= 0")
    if bool(args.lab) != bool(args.model):
        ap.error("--lab and --model go together")
    for path in (args.weights, args.goldens, args.lab):
        if path and not os.path.exists(path):
            ap.error(f"{path}: not found")
    return args


def main():
    args = parse_args()
    try:
        import torch
        from torch_train_golden import check_against_goldens
        from yolo26_torch import load_safetensors
    except ImportError as e:
        print(f"torch_train_step: PyTorch is not available ({e})")
        return 0
    if not torch.cuda.is_available():
        print("torch_train_step: PyTorch sees no CUDA device")
        return 0
    dev = torch.device("cuda")
    print(f"GPU: {torch.cuda.get_device_name()}  torch {torch.__version__}")
    sd, _ = load_safetensors(args.weights)
    if not check_against_goldens(sd, args.goldens, dev):
        print("torch_train_step: the port does not match the goldens; nothing timed")
        return 1

    classes = sd["model.23.one2one_cv3.0.2.weight"].shape[0]
    configs = [(p, None) for p in args.precisions] + ([("amp", args.compile)] if args.compile else [])
    rows = {}
    for batch in args.batches:
        host_batch = synthetic_batch(torch, batch, args.imgsz, args.boxes, classes, args.seed)
        upload = time_ms(torch, lambda: [t.to(dev) for t in host_batch], args.warmup, args.reps)
        print(f"batch {batch}: its upload alone (part of every iteration below) {upload:.2f} ms", flush=True)
        for optimizer in args.optimizers:
            for precision, compile_mode in configs:
                column = precision + (" compiled" if compile_mode else "")
                ms, loss = time_iteration(torch, sd, host_batch, optimizer, precision, compile_mode, args, dev)
                rows[(batch, optimizer, column)] = ms
                print(f"PyTorch batch {batch} {optimizer} {column}: {ms:.2f} ms, {batch * 1e3 / ms:.0f} img/s "
                      f"(last loss {loss:.4g})", flush=True)
    labs = {}
    if args.lab:
        for batch in args.batches:
            for optimizer in args.optimizers:
                for precision in LAB_PRECISIONS:
                    ms, err = lab_train_step(args, batch, optimizer, precision)
                    labs[(batch, optimizer, precision)] = ms if ms else err
                    print(f"lab batch {batch} {optimizer} {precision}: "
                          + (f"{ms:.2f} ms, {batch * 1e3 / ms:.0f} img/s" if ms else f"failed: {err}"), flush=True)
    print_table(rows, labs, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
