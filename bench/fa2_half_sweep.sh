#!/usr/bin/env bash
# The fp16/bf16 Flash Attention 2 measurements of docs/PERFORMANCE.md, on a GPU: a sweep of tile shapes
# (FWD_TILE / DQ_TILE / DKDV_TILE, WARPSxMTxSTEP) at BH 64, N 1024, then the shapes 4x16x4096x{64,128}
# at the default tiles in both element types and every variant (the backward's mma and mma_fused_dq). Every
# `lab bench` checks its instance against the float64 reference first (the N = 4096 checks take most of the
# time). Usage: bench/fa2_half_sweep.sh [LAB] [PART], PART sweep, final (the N = 4096 rows, backward first)
# or all (the default).
set -uo pipefail
lab=${1:-lab}
part=${2:-all}
bench() { "$lab" bench "$@" --iters 30 --warmup 5 2>&1 | grep -E "^command line|FAIL|failed|lab:" || true; }
shape="--param BH=64 --param N_CTX_Q=1024 --param N_CTX_K=1024"
[ "$part" != final ] && echo "### tile sweep, f16, BH 64, N 1024"
[ "$part" != final ] && for d in 64 128; do
  for t in 4x2x64 4x1x64 8x1x64 4x2x32 8x2x64 4x1x128; do
    echo "--- fwd D=$d FWD_TILE=$t"
    bench flash_attn2_fwd_half $shape --param HEAD_DIM=$d --param FWD_TILE=$t
  done
  for t in 4x1x64 4x2x64 4x2x32 8x1x64 4x1x32; do
    echo "--- bwd D=$d DQ_TILE=$t"
    bench flash_attn2_bwd_half $shape --param HEAD_DIM=$d --param DQ_TILE=$t
  done
  for t in 4x1x32 4x1x64 8x1x32 8x1x64; do
    echo "--- bwd D=$d DKDV_TILE=$t"
    bench flash_attn2_bwd_half $shape --param HEAD_DIM=$d --param DKDV_TILE=$t
  done
done
[ "$part" != sweep ] && echo "### 4x16x4096, default tiles"
[ "$part" != sweep ] && for dt in f16 bf16; do
  for k in bwd fwd; do
    for d in 64 128; do
      echo "--- $k $dt D=$d"
      bench flash_attn2_${k}_half --all-variants --param BH=64 --param N_CTX_Q=4096 --param N_CTX_K=4096 \
        --param HEAD_DIM=$d --param DTYPE=$dt
    done
  done
done
