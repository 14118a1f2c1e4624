// JPEG decode and encode with libjpeg-turbo, the library OpenCV (and so Ultralytics) decodes with: the same
// pixels as the reference pipeline's input (stb_image's decoder differs by up to 3/255), and a decoder and
// encoder several times faster than stb's, which bound `lab detect` on folders.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "pipeline/image/image.hpp"

namespace lab {

// Whether the bytes start with a JPEG marker (FF D8 FF).
bool looks_like_jpeg(const std::vector<uint8_t>& bytes);
// Decodes to RGB with libjpeg's defaults (accurate integer IDCT, fancy upsampling), as cv2.imread does.
// UsageError "<name>: cannot read image (<libjpeg's message>)" for corrupt or truncated data (libjpeg's
// warnings, such as a premature end of data, count as errors: no partial image is returned).
Image decode_jpeg(const std::vector<uint8_t>& bytes, const std::string& name);
// The width and height the JPEG header declares, without decoding; false when the header cannot be read.
bool jpeg_size(const std::vector<uint8_t>& bytes, int* width, int* height);
// Baseline JPEG at `quality` (1..100), 4:2:0 as cv2.imwrite writes. RuntimeError naming `name` on failure.
std::vector<uint8_t> encode_jpeg(const Image& image, int quality, const std::string& name);

}  // namespace lab
