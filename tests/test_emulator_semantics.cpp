// The CUDA semantics the cpu emulator honours, each on a targeted kernel (tests/emulator_kernels):
// shared-memory tree reduction with __syncthreads, shuffles in all four directions, votes with partial masks,
// barrier reductions, atomics from many blocks, dynamic shared memory over 48 KiB. Every test runs on every
// available backend, so on a GPU machine the same expectations are checked against the hardware.
#include <catch2/catch.hpp>

#include <cstring>

#include "kernels/compare.hpp"
#include "tests/test_emulator_support.hpp"

using namespace lab;

namespace {

std::unique_ptr<Backend> backend_named(const std::string& name) {
  return make_backend(name, test::emulator_kernels_context());
}

}  // namespace

TEST_CASE("emulator: shared-memory tree reduction with __syncthreads, template kernels by name",
          "[emulator]") {
  for (const std::string& name : available_backends()) {
    INFO("backend " << name);
    auto backend = backend_named(name);
    auto module = backend->compile({"reductions.cu", {}, {"tree_sum<256>", "tree_sum<64>"}});
    const int n = 40000;
    const std::vector<float> in = random_uniform(n, -1.0f, 1.0f, 11);
    DeviceBuffer d_in = backend->upload_vector(in);
    for (int block : {256, 64}) {
      INFO("tree_sum<" << block << ">");
      const unsigned blocks = unsigned((n + block - 1) / block);
      DeviceBuffer d_out = test::poisoned_floats(*backend, blocks);
      int count = n;
      void* in_ptr = d_in.get();
      void* out_ptr = d_out.get();
      backend->launch(module->kernel("tree_sum<" + std::to_string(block) + ">"),
                      {{blocks, 1, 1}, {unsigned(block), 1, 1}}, kernel_args(in_ptr, out_ptr, count));
      backend->synchronize();
      std::vector<float> out = backend->download_vector<float>(d_out, blocks);
      std::vector<double> ref(blocks, 0.0);
      for (int i = 0; i < n; ++i) ref[size_t(i / block)] += in[size_t(i)];
      // float partial sums of 256 values of magnitude < 1: rounding stays far under 1e-5 relative.
      OutputCheck check = make_check("sums", {blocks}, out, ref, Tolerance{1e-6, 1e-5});
      CHECK(check.metrics.non_finite == 0);
      CHECK(check.pass);
    }
  }
}

TEST_CASE("emulator: warp shuffles xor/down/up/idx follow CUDA's lane rules", "[emulator]") {
  for (const std::string& name : available_backends()) {
    INFO("backend " << name);
    auto backend = backend_named(name);
    auto module = backend->compile({"reductions.cu", {}, {"warp_shuffles"}});
    const unsigned blocks = 6, threads = 128, total = blocks * threads, warps = total / 32;
    const std::vector<float> in = random_uniform(total, 0.0f, 2.0f, 12);
    DeviceBuffer d_in = backend->upload_vector(in);
    DeviceBuffer d_out = test::poisoned_floats(*backend, warps * 128);
    void* in_ptr = d_in.get();
    void* out_ptr = d_out.get();
    backend->launch(module->kernel("warp_shuffles"), {{blocks, 1, 1}, {threads, 1, 1}},
                    kernel_args(in_ptr, out_ptr));
    backend->synchronize();
    std::vector<float> out = backend->download_vector<float>(d_out, warps * 128);
    for (unsigned w = 0; w < warps; ++w) {
      const float* v = &in[w * 32];
      const float* o = &out[w * 128];
      double total_sum = 0;
      for (int l = 0; l < 32; ++l) total_sum += v[l];
      double down[32];
      for (int l = 0; l < 32; ++l) down[l] = v[l];
      for (int offset = 16; offset > 0; offset >>= 1) {
        double next[32];
        for (int l = 0; l < 32; ++l) next[l] = down[l] + (l + offset < 32 ? down[l + offset] : down[l]);
        std::memcpy(down, next, sizeof down);
      }
      int prefix = 0;
      for (int l = 0; l < 32; ++l) {
        INFO("warp " << w << " lane " << l);
        CHECK(o[l] == Approx(total_sum).epsilon(1e-5));  // float butterfly vs double sum
        CHECK(o[32 + l] == Approx(down[l]).epsilon(1e-6));
        prefix += int(v[l] * 100.0f);
        CHECK(o[64 + l] == float(prefix));
        CHECK(o[96 + l] == v[(l & ~7) + ((l + 1) & 7)]);
      }
    }
  }
}

TEST_CASE("emulator: ballot/any/all with partial masks and divergent branches, block vote barriers",
          "[emulator]") {
  for (const std::string& name : available_backends()) {
    INFO("backend " << name);
    auto backend = backend_named(name);
    auto module = backend->compile({"votes.cu", {}, {"warp_votes", "block_votes"}});
    const unsigned blocks = 4, threads = 96, total = blocks * threads;
    std::vector<int> pred(total);
    const std::vector<float> r = random_uniform(total, 0.0f, 1.0f, 13);
    for (unsigned i = 0; i < total; ++i) pred[i] = r[i] < 0.5f ? 0 : 1 + int(i % 3);
    for (unsigned i = 0; i < 32; ++i) pred[32 + i] = 1;                // warp 1: every vote is true
    for (unsigned i = 0; i < threads; ++i) pred[threads + i] = 1;      // block 1: __syncthreads_and is 1
    for (unsigned i = 0; i < threads; ++i) pred[2 * threads + i] = 0;  // block 2: __syncthreads_or is 0
    DeviceBuffer d_pred = backend->upload_vector(pred);
    DeviceBuffer d_warp = backend->upload_vector(std::vector<unsigned>(total * 4, 0xdeadbeefu));
    DeviceBuffer d_block = backend->upload_vector(std::vector<int>(blocks * 3, -7));
    void* pred_ptr = d_pred.get();
    void* warp_ptr = d_warp.get();
    void* block_ptr = d_block.get();
    backend->launch(module->kernel("warp_votes"), {{blocks, 1, 1}, {threads, 1, 1}},
                    kernel_args(pred_ptr, warp_ptr));
    backend->launch(module->kernel("block_votes"), {{blocks, 1, 1}, {threads, 1, 1}},
                    kernel_args(pred_ptr, block_ptr));
    backend->synchronize();
    std::vector<unsigned> votes = backend->download_vector<unsigned>(d_warp, total * 4);
    std::vector<int> block_votes = backend->download_vector<int>(d_block, blocks * 3);
    for (unsigned w = 0; w < total / 32; ++w) {
      unsigned ballot = 0;
      for (unsigned l = 0; l < 32; ++l) ballot |= (pred[w * 32 + l] != 0 ? 1u : 0u) << l;
      for (unsigned l = 0; l < 32; ++l) {
        INFO("warp " << w << " lane " << l);
        const unsigned mask = (l & 1) ? 0xaaaaaaaau : 0x55555555u;
        const unsigned* o = &votes[(w * 32 + l) * 4];
        CHECK(o[0] == (ballot & mask));
        CHECK(o[1] == unsigned((ballot & mask) != 0));
        CHECK(o[2] == unsigned((ballot & mask) == mask));
        CHECK(o[3] == (l < 20 ? ballot & 0x000fffffu : ~ballot & 0xfff00000u));
      }
    }
    for (unsigned b = 0; b < blocks; ++b) {
      int count = 0;
      for (unsigned i = 0; i < threads; ++i) count += pred[b * threads + i] != 0;
      INFO("block " << b);
      CHECK(block_votes[b * 3 + 0] == count);
      CHECK(block_votes[b * 3 + 1] == int(count == int(threads)));
      CHECK(block_votes[b * 3 + 2] == int(count > 0));
    }
    CHECK(block_votes[1 * 3 + 1] == 1);
    CHECK(block_votes[2 * 3 + 2] == 0);
  }
}

TEST_CASE("emulator: atomics from many blocks are atomic", "[emulator]") {
  for (const std::string& name : available_backends()) {
    INFO("backend " << name);
    auto backend = backend_named(name);
    auto module = backend->compile({"atomics.cu", {}, {"atomic_accumulate"}});
    const int n = 1 << 16;
    const std::vector<float> in = random_uniform(n, 0.0f, 1.0f, 14);
    DeviceBuffer d_in = backend->upload_vector(in);
    DeviceBuffer d_sum = backend->upload_vector(std::vector<float>{0.0f});
    DeviceBuffer d_ints = backend->upload_vector(std::vector<int>{0, 0, 0});
    DeviceBuffer d_min = backend->upload_vector(std::vector<unsigned>{0xffffffffu});
    void* in_ptr = d_in.get();
    void* sum_ptr = d_sum.get();
    int* ints = d_ints.as<int>();
    int* count_ptr = ints;
    int* max_ptr = ints + 1;
    int* cas_ptr = ints + 2;
    void* min_ptr = d_min.get();
    int count = n;
    backend->launch(module->kernel("atomic_accumulate"), {{unsigned(n / 128), 1, 1}, {128, 1, 1}},
                    kernel_args(in_ptr, count, sum_ptr, count_ptr, max_ptr, cas_ptr, min_ptr));
    backend->synchronize();
    const float sum = backend->download_vector<float>(d_sum, 1)[0];
    const std::vector<int> got = backend->download_vector<int>(d_ints, 3);
    const unsigned min_index = backend->download_vector<unsigned>(d_min, 1)[0];
    double ref_sum = 0;
    float ref_max = 0;
    unsigned ref_min_index = 0xffffffffu;
    for (int i = 0; i < n; ++i) {
      ref_sum += in[size_t(i)];
      ref_max = std::max(ref_max, in[size_t(i)]);
      if (in[size_t(i)] > 0.5f) ref_min_index = std::min(ref_min_index, unsigned(i));
    }
    // 65536 float additions in an arbitrary order: rounding error grows like sqrt(n) * eps * sum; 1e-4 is
    // ample.
    CHECK(sum == Approx(ref_sum).epsilon(1e-4));
    CHECK(got[0] == n);
    float max_value, cas_value;
    std::memcpy(&max_value, &got[1], 4);
    std::memcpy(&cas_value, &got[2], 4);
    CHECK(max_value == ref_max);
    CHECK(cas_value == ref_max);
    CHECK(min_index == ref_min_index);
  }
}

TEST_CASE("emulator: dynamic shared memory larger than 48 KiB", "[emulator]") {
  for (const std::string& name : available_backends()) {
    INFO("backend " << name);
    auto backend = backend_named(name);
    auto module = backend->compile({"dynamic_shared.cu", {}, {"reverse_through_shared"}});
    const unsigned rows = 5;
    int count = 24576;  // 96 KiB of floats
    const std::vector<float> in = random_uniform(size_t(rows) * count, -3.0f, 3.0f, 15);
    DeviceBuffer d_in = backend->upload_vector(in);
    DeviceBuffer d_out = test::poisoned_floats(*backend, in.size());
    void* in_ptr = d_in.get();
    void* out_ptr = d_out.get();
    backend->launch(module->kernel("reverse_through_shared"), {{rows, 1, 1}, {256, 1, 1}, size_t(count) * 4},
                    kernel_args(in_ptr, out_ptr, count));
    backend->synchronize();
    std::vector<float> out = backend->download_vector<float>(d_out, in.size());
    size_t wrong = 0;
    for (unsigned r = 0; r < rows; ++r)
      for (int i = 0; i < count; ++i)
        wrong += out[size_t(r) * count + size_t(i)] != in[size_t(r) * count + size_t(count - 1 - i)];
    CHECK(wrong == 0);
  }
}
