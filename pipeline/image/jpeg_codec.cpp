// libjpeg-turbo behind two calls. libjpeg reports errors through a callback that must not return, so each
// call runs in a plain function whose frame holds no C++ object with a destructor between setjmp and the
// longjmp of the error callback.
#include "pipeline/image/jpeg_codec.hpp"

#include <csetjmp>
#include <cstdio>
#include <cstdlib>

#include <jpeglib.h>

#include "nvrtc_runtime/errors.hpp"

namespace lab {
namespace {

struct ErrorManager {
  jpeg_error_mgr base;
  std::jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
};

[[noreturn]] void fail(j_common_ptr cinfo) {
  auto* errors = reinterpret_cast<ErrorManager*>(cinfo->err);
  (*cinfo->err->format_message)(cinfo, errors->message);
  std::longjmp(errors->jump, 1);
}

// Warnings (level -1: corrupt or truncated data that libjpeg would fill with grey) fail like errors; trace
// messages are dropped.
void on_message(j_common_ptr cinfo, int level) {
  if (level < 0) fail(cinfo);
}

void install_errors(ErrorManager& errors, jpeg_common_struct* cinfo) {
  cinfo->err = jpeg_std_error(&errors.base);
  errors.base.error_exit = fail;
  errors.base.emit_message = on_message;
  errors.message[0] = '\0';
}

// Returns false with `errors.message` set when libjpeg fails, or with it empty when the declared size is
// refused (image_size_problem). Without `pixels`, stops after the header: only the size is set.
bool read_rgb(const std::vector<uint8_t>& bytes, Image* image, ErrorManager& errors, bool pixels) {
  jpeg_decompress_struct cinfo;
  install_errors(errors, reinterpret_cast<jpeg_common_struct*>(&cinfo));
  if (setjmp(errors.jump)) {
    jpeg_destroy_decompress(&cinfo);
    return false;
  }
  jpeg_create_decompress(&cinfo);
  jpeg_mem_src(&cinfo, bytes.data(), static_cast<unsigned long>(bytes.size()));
  jpeg_read_header(&cinfo, TRUE);
  // The declared size, checked before anything is allocated; decode_jpeg words the refusal.
  image->width = static_cast<int>(cinfo.image_width);
  image->height = static_cast<int>(cinfo.image_height);
  if (!pixels || !image_size_problem(image->width, image->height).empty()) {
    jpeg_destroy_decompress(&cinfo);
    return !pixels;
  }
  cinfo.out_color_space = JCS_RGB;
  jpeg_start_decompress(&cinfo);
  image->width = static_cast<int>(cinfo.output_width);
  image->height = static_cast<int>(cinfo.output_height);
  image->rgb.resize(size_t(cinfo.output_width) * cinfo.output_height * 3);
  while (cinfo.output_scanline < cinfo.output_height) {
    JSAMPROW row = image->rgb.data() + size_t(cinfo.output_scanline) * cinfo.output_width * 3;
    jpeg_read_scanlines(&cinfo, &row, 1);
  }
  jpeg_finish_decompress(&cinfo);
  jpeg_destroy_decompress(&cinfo);
  return true;
}

// Returns false with `errors.message` set when libjpeg fails; `*out` is libjpeg's malloc'ed buffer.
bool write_rgb(const Image& image, int quality, unsigned char** out, unsigned long* size,
               ErrorManager& errors) {
  jpeg_compress_struct cinfo;
  install_errors(errors, reinterpret_cast<jpeg_common_struct*>(&cinfo));
  if (setjmp(errors.jump)) {
    jpeg_destroy_compress(&cinfo);
    return false;
  }
  jpeg_create_compress(&cinfo);
  jpeg_mem_dest(&cinfo, out, size);
  cinfo.image_width = static_cast<JDIMENSION>(image.width);
  cinfo.image_height = static_cast<JDIMENSION>(image.height);
  cinfo.input_components = 3;
  cinfo.in_color_space = JCS_RGB;
  jpeg_set_defaults(&cinfo);
  jpeg_set_quality(&cinfo, quality, TRUE);
  jpeg_start_compress(&cinfo, TRUE);
  while (cinfo.next_scanline < cinfo.image_height) {
    JSAMPROW row = const_cast<uint8_t*>(image.rgb.data()) + size_t(cinfo.next_scanline) * image.width * 3;
    jpeg_write_scanlines(&cinfo, &row, 1);
  }
  jpeg_finish_compress(&cinfo);
  jpeg_destroy_compress(&cinfo);
  return true;
}

}  // namespace

bool looks_like_jpeg(const std::vector<uint8_t>& bytes) {
  return bytes.size() >= 3 && bytes[0] == 0xFF && bytes[1] == 0xD8 && bytes[2] == 0xFF;
}

Image decode_jpeg(const std::vector<uint8_t>& bytes, const std::string& name) {
  Image image;
  ErrorManager errors;
  if (!read_rgb(bytes, &image, errors, true))
    throw UsageError(
        name + ": cannot read image (" +
        (errors.message[0] ? std::string(errors.message) : image_size_problem(image.width, image.height)) +
        ")");
  return image;
}

bool jpeg_size(const std::vector<uint8_t>& bytes, int* width, int* height) {
  Image header;
  ErrorManager errors;
  if (!read_rgb(bytes, &header, errors, false)) return false;
  *width = header.width, *height = header.height;
  return true;
}

std::vector<uint8_t> encode_jpeg(const Image& image, int quality, const std::string& name) {
  unsigned char* buffer = nullptr;
  unsigned long size = 0;
  ErrorManager errors;
  const bool ok = write_rgb(image, quality, &buffer, &size, errors);
  std::vector<uint8_t> encoded;
  if (ok) encoded.assign(buffer, buffer + size);
  std::free(buffer);
  if (!ok) throw RuntimeError(name + ": JPEG encoding failed (" + std::string(errors.message) + ")");
  return encoded;
}

}  // namespace lab
