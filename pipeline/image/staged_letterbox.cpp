// The staged letterbox's block: layout, writing, and the device launch's parameters.
#include "pipeline/image/staged_letterbox.hpp"

#include <cstring>
#include <new>
#include <vector>

namespace lab {
namespace {

size_t aligned(size_t bytes) {
  return (bytes + 15) / 16 * 16;
}

}  // namespace

StagedLetterbox staged_letterbox_layout(const LetterboxGeometry& geometry) {
  StagedLetterbox s;
  s.geometry = geometry;
  s.columns = aligned(sizeof(StagedLetterbox));
  s.rows = s.columns + aligned(size_t(geometry.resized_width) * sizeof(LetterboxTap));
  s.pixels = s.rows + aligned(size_t(geometry.resized_height) * sizeof(LetterboxTap));
  s.bytes = s.pixels + aligned(size_t(geometry.source_width) * size_t(geometry.source_height) * 3);
  return s;
}

const StagedLetterbox* stage_letterbox(const Image& source, const LetterboxGeometry& geometry, void* block) {
  const StagedLetterbox layout = staged_letterbox_layout(geometry);
  auto* bytes = static_cast<unsigned char*>(block);
  const std::vector<LetterboxTap> columns = resize_taps(source.width, geometry.resized_width, true);
  const std::vector<LetterboxTap> rows = resize_taps(source.height, geometry.resized_height, false);
  const StagedLetterbox* header = new (block) StagedLetterbox(layout);
  std::memcpy(bytes + layout.columns, columns.data(), columns.size() * sizeof(LetterboxTap));
  std::memcpy(bytes + layout.rows, rows.data(), rows.size() * sizeof(LetterboxTap));
  std::memcpy(bytes + layout.pixels, source.rgb.data(), source.rgb.size());
  return header;
}

LetterboxResizeParams letterbox_resize_params(const StagedLetterbox& staged, const unsigned char* device_block,
                                              float* out) {
  const LetterboxGeometry& g = staged.geometry;
  LetterboxResizeParams p{};
  p.image = device_block + staged.pixels;
  p.columns = reinterpret_cast<const LetterboxTap*>(device_block + staged.columns);
  p.rows = reinterpret_cast<const LetterboxTap*>(device_block + staged.rows);
  p.out = out;
  p.src_w = g.source_width;
  p.resized_w = g.resized_width, p.resized_h = g.resized_height;
  p.dst_w = g.width, p.dst_h = g.height;
  p.left = g.left, p.top = g.top;
  p.pad = kLetterboxPad;
  return p;
}

}  // namespace lab
