// The sizes `lab detect` and `lab bench pipeline` accept, checked before anything is allocated: --imgsz in
// [32, 4096], rounded up to a multiple of 32 the same way in both verbs, and --batch images of that size
// within one pixel budget per forward (256 images of 640x640), so a typo cannot ask for gigabytes.
#pragma once
#include <cstdint>

#include <CLI/CLI.hpp>

namespace lab {

inline constexpr int kMinImgsz = 32, kMaxImgsz = 4096;
inline constexpr int kMaxBatch = 1024;
inline constexpr int64_t kMaxPixelsPerForward = int64_t(256) * 640 * 640;

CLI::Validator imgsz_range();  // [kMinImgsz, kMaxImgsz] in words
CLI::Validator batch_range();  // [1, kMaxBatch]

// `imgsz` rounded up to a multiple of 32, with a warning on stderr when it changes.
int rounded_imgsz(int imgsz);

// UsageError when batch x imgsz x imgsz exceeds kMaxPixelsPerForward.
void check_batch_pixels(int batch, int imgsz);

}  // namespace lab
