// How many images per second libjpeg(-turbo) decodes and re-encodes (quality 95, 4:2:0: what `lab detect`
// writes) on T threads of one process, each image in fresh buffers as `lab detect`'s host workers take it:
// the ceiling of the host side of `lab detect` on a folder, apart from the letterbox, drawing and writing.
// Run several copies with T = 1 at once to compare with separate processes (no shared allocator or locks).
//
// Build: g++ -O2 -pthread bench/jpeg_threads.cpp -ljpeg -o jpeg_threads
// Usage: jpeg_threads THREADS IMAGES_PER_THREAD fresh|reuse IMAGE.jpg [IMAGE.jpg ...]
//        (reuse: each thread keeps one pixel buffer across its images)
#include <chrono>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

#include <jpeglib.h>  // after <cstdio> and <cstddef>: it uses FILE and size_t without including them

namespace {

using Clock = std::chrono::steady_clock;
using Bytes = std::vector<unsigned char>;

double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

void decode(const Bytes& jpeg, Bytes& rgb, int& width, int& height) {
  jpeg_decompress_struct c;
  jpeg_error_mgr errors;
  c.err = jpeg_std_error(&errors);
  jpeg_create_decompress(&c);
  jpeg_mem_src(&c, jpeg.data(), jpeg.size());
  jpeg_read_header(&c, TRUE);
  c.out_color_space = JCS_RGB;
  jpeg_start_decompress(&c);
  width = int(c.output_width), height = int(c.output_height);
  rgb.resize(size_t(width) * height * 3);
  while (c.output_scanline < c.output_height) {
    JSAMPROW row = rgb.data() + size_t(c.output_scanline) * width * 3;
    jpeg_read_scanlines(&c, &row, 1);
  }
  jpeg_finish_decompress(&c);
  jpeg_destroy_decompress(&c);
}

Bytes encode(const Bytes& rgb, int width, int height) {
  jpeg_compress_struct c;
  jpeg_error_mgr errors;
  c.err = jpeg_std_error(&errors);
  jpeg_create_compress(&c);
  unsigned char* buffer = nullptr;
  unsigned long size = 0;
  jpeg_mem_dest(&c, &buffer, &size);
  c.image_width = JDIMENSION(width), c.image_height = JDIMENSION(height);
  c.input_components = 3, c.in_color_space = JCS_RGB;
  jpeg_set_defaults(&c);
  jpeg_set_quality(&c, 95, TRUE);
  jpeg_start_compress(&c, TRUE);
  while (c.next_scanline < c.image_height) {
    JSAMPROW row = const_cast<unsigned char*>(rgb.data()) + size_t(c.next_scanline) * width * 3;
    jpeg_write_scanlines(&c, &row, 1);
  }
  jpeg_finish_compress(&c);
  jpeg_destroy_compress(&c);
  Bytes out(buffer, buffer + size);
  std::free(buffer);
  return out;
}

struct ThreadTimes {
  double decode_ms = 0, encode_ms = 0;
};

void work(int thread, const std::vector<Bytes>& images, int count, bool reuse, ThreadTimes& times) {
  Bytes kept;
  for (int i = 0; i < count; ++i) {
    Bytes fresh;
    Bytes& rgb = reuse ? kept : fresh;
    int width = 0, height = 0;
    const auto start = Clock::now();
    decode(images[size_t(i + thread) % images.size()], rgb, width, height);
    times.decode_ms += ms_since(start);
    const auto middle = Clock::now();
    encode(rgb, width, height);
    times.encode_ms += ms_since(middle);
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 5) {
    std::fprintf(stderr, "usage: %s THREADS IMAGES_PER_THREAD fresh|reuse IMAGE.jpg [IMAGE.jpg ...]\n", argv[0]);
    return 2;
  }
  const int threads = std::atoi(argv[1]), count = std::atoi(argv[2]);
  if (threads < 1 || threads > 1024 || count < 1) {
    std::fprintf(stderr, "THREADS (1-1024) and IMAGES_PER_THREAD must be positive integers, got '%s' and '%s'\n",
                 argv[1], argv[2]);
    return 2;
  }
  if (std::string(argv[3]) != "fresh" && std::string(argv[3]) != "reuse") {
    std::fprintf(stderr, "the third argument must be fresh or reuse, got '%s'\n", argv[3]);
    return 2;
  }
  const bool reuse = std::string(argv[3]) == "reuse";
  std::vector<Bytes> images;
  for (int i = 4; i < argc; ++i) {
    std::ifstream file(argv[i], std::ios::binary);
    images.emplace_back(std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>());
    if (images.back().empty()) {
      std::fprintf(stderr, "%s: cannot read\n", argv[i]);
      return 1;
    }
  }
  std::vector<ThreadTimes> times(static_cast<size_t>(threads));
  std::vector<std::thread> workers;
  const auto start = Clock::now();
  for (int t = 0; t < threads; ++t)
    workers.emplace_back(work, t, std::cref(images), count, reuse, std::ref(times[size_t(t)]));
  for (std::thread& w : workers) w.join();
  const double seconds = ms_since(start) / 1e3, n = double(threads) * count;
  double decode_ms = 0, encode_ms = 0;
  for (const ThreadTimes& t : times) decode_ms += t.decode_ms, encode_ms += t.encode_ms;
  std::printf("threads %d %s: %.0f img/s, decode %.2f ms, encode %.2f ms per image\n", threads, argv[3],
              n / seconds, decode_ms / n, encode_ms / n);
  return 0;
}
