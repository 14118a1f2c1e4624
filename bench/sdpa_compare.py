#!/usr/bin/env python3
"""PyTorch scaled_dot_product_attention on the attention benchmark shapes, for comparison with `lab bench`.

For each shape (BH, N, HEAD_DIM), dtype (float32, float16, bfloat16) and SDPA backend that accepts it, times the
forward and the forward+backward (backward time = their difference) with CUDA events: median of warm runs.
TFLOP/s use the lab's formula: forward 4*BH*Nq*Nk*D, backward 2.5x that. Tensors are [1, BH, N, D] (SDPA's
[batch, heads, seq, dim]); non-causal, scale 1/sqrt(D), as flash_attn2_fwd with SCALE = 0.

Usage: python3 bench/sdpa_compare.py [--warmup 5] [--reps 20] [--shapes 2x400x32,64x1600x32,...]
"""
import argparse
import statistics
import sys
import warnings

DEFAULT_SHAPES = "2x400x32,64x1600x32,64x4096x64,64x4096x128"


def parse_shapes(text):
    shapes = []
    for item in text.split(","):
        bh, n, d = (int(x) for x in item.lower().split("x"))
        shapes.append((bh, n, d))
    return shapes


def time_ms(torch, fn, warmup, reps):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--reps", type=int, default=20)
    parser.add_argument("--shapes", default=DEFAULT_SHAPES, help="comma-separated BHxNxD")
    args = parser.parse_args()

    try:
        import torch
        import torch.nn.functional as F
        from torch.nn.attention import SDPBackend, sdpa_kernel
    except ImportError as e:
        print(f"sdpa_compare: PyTorch is not available ({e}); nothing to compare.")
        return 0
    if not torch.cuda.is_available():
        print("sdpa_compare: PyTorch sees no CUDA device; nothing to compare.")
        return 0

    # SDPA warns each time a backend refuses a dtype; the table already says "not available".
    warnings.filterwarnings("ignore", category=UserWarning)
    # float32 matmuls in plain IEEE float32 (no TF32), like the lab's kernels.
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    backends = [("flash", SDPBackend.FLASH_ATTENTION), ("efficient", SDPBackend.EFFICIENT_ATTENTION),
                ("cudnn", SDPBackend.CUDNN_ATTENTION), ("math", SDPBackend.MATH)]
    dtypes = [("float32", torch.float32), ("float16", torch.float16), ("bfloat16", torch.bfloat16)]
    print(f"device: {torch.cuda.get_device_name()}  torch {torch.__version__}  "
          f"median of {args.reps} runs after {args.warmup} warm-ups")
    header = f"{'BH':>4} {'N':>6} {'D':>4} {'dtype':>9} {'backend':>10} {'fwd ms':>10} {'fwd TF/s':>9} " \
             f"{'bwd ms':>10} {'bwd TF/s':>9}"
    print(header)
    print("-" * len(header))
    for bh, n, d in parse_shapes(args.shapes):
        flops = 4.0 * bh * n * n * d
        for dname, dtype in dtypes:
            gen = torch.Generator(device="cuda").manual_seed(0)
            q, k, v = (torch.rand(1, bh, n, d, device="cuda", dtype=dtype, generator=gen) * 4 - 2
                       for _ in range(3))
            for t in (q, k, v):
                t.requires_grad_(True)
            grad = torch.rand(1, bh, n, d, device="cuda", dtype=dtype, generator=gen) * 2 - 1
            for bname, backend in backends:
                try:
                    with sdpa_kernel([backend]):
                        fwd = lambda: F.scaled_dot_product_attention(q, k, v)
                        fwd()
                        fwd_ms = time_ms(torch, fwd, args.warmup, args.reps)

                        def fwd_bwd():
                            out = F.scaled_dot_product_attention(q, k, v)
                            torch.autograd.grad(out, (q, k, v), grad)

                        both_ms = time_ms(torch, fwd_bwd, args.warmup, args.reps)
                except (RuntimeError, torch.OutOfMemoryError) as e:
                    reason = str(e).strip().splitlines()[0][:60] if str(e).strip() else type(e).__name__
                    print(f"{bh:>4} {n:>6} {d:>4} {dname:>9} {bname:>10}   not available: {reason}")
                    torch.cuda.empty_cache()
                    continue
                bwd_ms = max(both_ms - fwd_ms, 1e-9)
                print(f"{bh:>4} {n:>6} {d:>4} {dname:>9} {bname:>10} {fwd_ms:>10.4f} {flops / fwd_ms / 1e9:>9.2f} "
                      f"{bwd_ms:>10.4f} {2.5 * flops / bwd_ms / 1e9:>9.2f}")
            del q, k, v, grad
            torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main())
