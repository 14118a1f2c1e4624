#!/usr/bin/env python3
"""The PyTorch side of docs/PERFORMANCE.md's table, measured on the same GPU in the same run as `lab bench`.

YOLO26 is rebuilt with plain PyTorch modules (yolo26_torch.py's build_model) from the same weights (the
safetensors file that `lab convert` writes from the .pt: no Ultralytics needed), Conv + BatchNorm fused as
Ultralytics' inference does, attention through scaled_dot_product_attention, the end-to-end top-k
post-process of spec/yolo26.md.
Rows (CUDA events, median over warm runs): eager and CUDA-graph forward at batch 1 (float32 with and without
TF32; float16 and bfloat16 with the whole network in 16 bits), batch-32 throughput, the PSA attention core at
yolo26n size, SDPA flash/cuDNN attention at 4x16x4096x{64,128} (skipped with --no-fa2). With --lab LAB it runs
`lab bench pipeline` (fp32, tf32, fp16, bf16) and `lab bench flash_attn2_{fwd,bwd}_half` in the same process
tree and prints the ratios. With --folder DIR it also times `lab detect DIR` against an Ultralytics-style
predict loop over the same JPEGs (torch_predict_folder.py).
The network is checked first against the golden detections when --golden is given.

Usage: python3 bench/compare_torch.py --weights yolo26n.safetensors [--golden bus640_golden_2.safetensors]
       [--lab build/lab/lab --model yolo26n.pt] [--compile] [--no-fa2] [--folder DIR] [--reps 50]
"""
import argparse
import json
import os
import subprocess
import sys

from sdpa_compare import time_ms  # CUDA-event median over warm runs, shared with the SDPA comparison
from torch_predict_folder import predict_folder  # the Ultralytics-style predict loop of the folder row


def time_graph_replays(torch, model, dtype, tag, rows, args, dev):
    """CUDA-graph replays of `model` on random `dtype` input at batch 1 and 32: rows "b1 TAG cuda-graph",
    "b32 TAG cuda-graph" (ms) and "b32 TAG img/s"."""
    x = torch.rand(1, 3, 640, 640, device=dev, dtype=dtype)
    g = graph_of(torch, model, x)
    rows[f"b1 {tag} cuda-graph"] = time_ms(torch, g.replay, args.warmup, args.reps)
    x32 = torch.rand(32, 3, 640, 640, device=dev, dtype=dtype)
    g32 = graph_of(torch, model, x32)
    ms = time_ms(torch, g32.replay, 3, max(10, args.reps // 5))
    rows[f"b32 {tag} cuda-graph"] = ms
    rows[f"b32 {tag} img/s"] = 32e3 / ms


def graph_of(torch, model, x):
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(3):
            model(x)
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        model(x)
    return graph


def run_lab_json(cmd):
    """Runs a `lab ... --json` command: (parsed output, []) or (None, its last error line). Exit 1 (a check
    failed) still returns the output, which says so."""
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode in (0, 1):
        try:
            return json.loads(out.stdout), []
        except json.JSONDecodeError:
            pass
    return None, (out.stderr or out.stdout).strip().splitlines()[-1:]


def lab_pipeline(lab, model, batch, precision, reps, layout=None):
    cmd = [lab, "bench", "pipeline", "--model", model, "--batch", str(batch), "--imgsz", "640", "--iters",
           str(reps), "--json"]
    if precision:
        cmd += ["--precision", precision]
    if layout:
        cmd += ["--layout", layout]
    return run_lab_json(cmd)


def lab_kernel_bench(lab, runner, params, reps, backend=None):
    """`lab bench RUNNER --param K=V ... --json`: (median ms, TFLOP/s, check passed) or (None, error lines)."""
    cmd = [lab, "bench", runner, "--iters", str(reps), "--warmup", "5", "--json"]
    for key, value in params.items():
        cmd += ["--param", f"{key}={value}"]
    if backend:
        cmd += ["--backend", backend]
    result, err = run_lab_json(cmd)
    if result is None:
        return None, err
    row = result["rows"][0]
    return (row["median_ms"], row["tflop_per_s"], row["pass"]), []


def print_attention_ratios(lab, rows, reps):
    """Our fp16/bf16 FA2 forward and backward at 4x16x4096x{64,128} beside the SDPA rows measured above."""
    print("\nlab bench flash_attn2_{fwd,bwd}_half (same GPU, same run), TFLOP/s:")
    for d in (64, 128):
        for dtype, name in (("f16", "float16"), ("bf16", "bfloat16")):
            for kind in ("fwd", "bwd"):
                params = {"BH": 64, "N_CTX_Q": 4096, "N_CTX_K": 4096, "HEAD_DIM": d, "DTYPE": dtype}
                result, err = lab_kernel_bench(lab, f"flash_attn2_{kind}_half", params, reps)
                if result is None:
                    print(f"  {kind} {dtype} D {d}: lab failed: {err}")
                    continue
                ms, tflops, passed = result
                line = f"  {kind} {dtype} D {d}: lab {tflops:.1f} ({ms:.3f} ms, check {'PASS' if passed else 'FAIL'})"
                for backend in ("flash", "cudnn"):
                    theirs = rows.get(f"sdpa {backend} {name} 4x16x4096x{d} {kind} TFLOP/s")
                    if theirs:
                        line += f", {backend} {theirs:.1f} (lab/{backend} = {tflops / theirs:.2f}x)"
                print(line)


def print_folder_row(torch, model, dev, args):
    """`lab detect FOLDER` (batch 1, float32, annotated JPEGs written) against the same folder through the
    Ultralytics-style loop, both on this GPU in this run; images per second of wall time."""
    files = sorted(os.path.join(args.folder, f) for f in os.listdir(args.folder)
                   if f.lower().endswith((".jpg", ".jpeg")))
    if not files:
        print(f"\nfolder row: no JPEGs in {args.folder}")
        return
    torch.backends.cudnn.allow_tf32 = True  # Ultralytics' default: PyTorch's TF32 convolutions
    n, seconds, kept = predict_folder(torch, model, files, "/tmp/compare_torch_predict", dev)
    theirs = n / seconds
    print(f"\nfolder of {n} JPEGs, batch 1 float32 (wall time, annotated images written):")
    print(f"  Ultralytics-style predict loop (PyTorch eager + OpenCV): {theirs:.1f} images/s "
          f"({1e3 * seconds / n:.2f} ms per image, {kept} boxes above 0.25)")
    if not (args.lab and args.model):
        return
    cmd = [args.lab, "detect", args.folder, "--backend", "cuda", "--model", args.model, "--out",
           "/tmp/compare_torch_lab_detect"]
    for run in ("warm-up", "measured"):
        out = subprocess.run(cmd, capture_output=True, text=True)
    line = next((l for l in out.stdout.splitlines() if l.startswith("Throughput:")), None)
    if out.returncode != 0 or line is None:
        print(f"  lab detect failed: {(out.stderr or out.stdout).strip().splitlines()[-1:]}")
        return
    ours = float(line.split(",")[1].split()[0])
    print(f"  lab detect: {ours:.1f} images/s ({line}); lab / loop = {ours / theirs:.2f}x")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--weights", required=True, help="safetensors from `lab convert yolo26n.pt OUT.safetensors`")
    ap.add_argument("--golden", help="bus640_golden_2.safetensors (holds `output`) to check the rebuilt network")
    ap.add_argument("--golden-input", help="bus640_golden_0.safetensors (holds `input`)")
    ap.add_argument("--lab", help="the lab binary: also run `lab bench pipeline` and print ratios")
    ap.add_argument("--model", help="checkpoint for `lab bench pipeline`")
    ap.add_argument("--compile", action="store_true", help="also time torch.compile(mode='max-autotune') (slow)")
    ap.add_argument("--folder", help="a folder of JPEGs: time `lab detect` on it against an Ultralytics-style "
                    "predict loop (torch_predict_folder.py), both batch 1 float32")
    ap.add_argument("--no-fa2", action="store_true", help="skip the fp16/bf16 Flash Attention rows (4x16x4096)")
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--reps", type=int, default=50)
    args = ap.parse_args()
    if args.folder and not os.path.isdir(args.folder):
        sys.exit(f"compare_torch: --folder {args.folder}: not a directory")
    try:
        import torch
        import torch.nn.functional as F
        from torch.nn.attention import SDPBackend, sdpa_kernel
        from yolo26_torch import build_model, load_safetensors  # the network, shared with torch_train_step.py
    except ImportError as e:
        print(f"compare_torch: PyTorch is not available ({e})")
        return 0
    if not torch.cuda.is_available():
        print("compare_torch: PyTorch sees no CUDA device")
        return 0
    dev = torch.device("cuda")
    sd, _ = load_safetensors(args.weights)
    model = build_model(sd).to(dev).eval()
    print(f"GPU: {torch.cuda.get_device_name()}  torch {torch.__version__}")
    rows = {}

    with torch.inference_mode():
        if args.golden and args.golden_input:
            golden, _ = load_safetensors(args.golden)
            gin, _ = load_safetensors(args.golden_input)
            torch.backends.cudnn.allow_tf32 = False
            out = model(gin["input"].to(dev)).cpu()
            ref = golden["output"]
            keep = ref[0, :, 4] > 0.25
            print(f"check vs golden output: {int(keep.sum())} detections > 0.25, max |box diff| "
                  f"{(out[0, keep, :4] - ref[0, keep, :4]).abs().max().item():.3g} px, max |score diff| "
                  f"{(out[0, keep, 4] - ref[0, keep, 4]).abs().max().item():.3g}, classes equal "
                  f"{bool((out[0, keep, 5] == ref[0, keep, 5]).all())}")

        for tf32 in (False, True):
            torch.backends.cudnn.allow_tf32 = tf32
            torch.backends.cuda.matmul.allow_tf32 = tf32
            tag = "tf32" if tf32 else "fp32"
            x = torch.rand(1, 3, 640, 640, device=dev)
            rows[f"b1 {tag} eager"] = time_ms(torch, lambda: model(x), args.warmup, args.reps)
            time_graph_replays(torch, model, torch.float32, tag, rows, args, dev)
        torch.backends.cudnn.allow_tf32 = True
        for tag, dtype in (("bf16", torch.bfloat16), ("fp16", torch.float16)):
            half = build_model(sd).to(dev).eval().to(dtype)
            time_graph_replays(torch, half, dtype, tag, rows, args, dev)
        if args.compile:  # `half` is the fp16 network from the loop above
            compiled = torch.compile(half, mode="max-autotune")
            xh = torch.rand(1, 3, 640, 640, device=dev, dtype=torch.float16)
            rows["b1 fp16 torch.compile max-autotune"] = time_ms(torch, lambda: compiled(xh), 5, args.reps)

        # The PSA attention core at yolo26n size: 1 x 2 heads x 400 x 32, two value halves as one D=64 call.
        q = torch.rand(1, 2, 400, 32, device=dev)
        k = torch.rand(1, 2, 400, 32, device=dev)
        v = torch.rand(1, 2, 400, 64, device=dev)
        with sdpa_kernel(SDPBackend.EFFICIENT_ATTENTION):
            rows["psa core sdpa efficient fp32 (1x2x400x32, V 64)"] = time_ms(
                torch, lambda: F.scaled_dot_product_attention(q, k, v), args.warmup, args.reps)

    for d in (64, 128) if not args.no_fa2 else ():
        for dtype in (torch.float16, torch.bfloat16):
            q, k, v = (torch.rand(4, 16, 4096, d, device=dev, dtype=dtype, requires_grad=True) for _ in range(3))
            flops = 4 * 4 * 16 * 4096 * 4096 * d
            for name, backend in (("flash", SDPBackend.FLASH_ATTENTION), ("cudnn", SDPBackend.CUDNN_ATTENTION)):
                try:
                    with sdpa_kernel(backend):
                        fwd = time_ms(torch, lambda: F.scaled_dot_product_attention(q, k, v), 5, 20)
                        o = F.scaled_dot_product_attention(q, k, v)
                        do = torch.rand_like(o)
                        both = time_ms(torch, lambda: torch.autograd.grad(
                            F.scaled_dot_product_attention(q, k, v), (q, k, v), do), 5, 20)
                    tag = f"sdpa {name} {str(dtype)[6:]} 4x16x4096x{d}"
                    rows[tag + " fwd TFLOP/s"] = flops / fwd / 1e9
                    rows[tag + " bwd TFLOP/s"] = 2.5 * flops / max(both - fwd, 1e-9) / 1e9
                except RuntimeError as e:
                    print(f"{name} {dtype} d={d}: {str(e).splitlines()[0]}")

    print("\nPyTorch (ms unless stated):")
    for key, value in rows.items():
        print(f"  {key:55s} {value:10.4g}")

    if args.lab and args.model:
        print("\nlab bench pipeline (same GPU, same run):")
        # fp32 twice: NCHW (FFMA) and the default layout (auto: NHWC, 3xTF32), both at float32 accuracy.
        for precision, layout in (("fp32", "nchw"), ("fp32", None), ("tf32", None), ("fp16", None),
                                  ("bf16", None)):
            for batch in (1, 32):
                torch_row = f"b{batch} {precision} cuda-graph"
                result, err = lab_pipeline(args.lab, args.model, batch, precision, args.reps, layout)
                label = f"batch {batch} {precision}" + (f" {layout}" if layout else "")
                if result is None:
                    print(f"  {label}: lab failed: {err}")
                    continue
                ours = result["graph_ms"]
                print(f"  {label}: lab {ours:.4g} ms vs torch {rows[torch_row]:.4g} ms "
                      f"(torch/lab = {rows[torch_row] / ours:.2f}x)")
    if args.lab and not args.no_fa2:
        print_attention_ratios(args.lab, rows, 30)
    if args.folder:
        print_folder_row(torch, model, dev, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
