// Robustness of the .pt loader: >= 300 seeded mutations of the real yolo26n.pt (truncations, flipped bytes
// and bits in the central directory and anywhere, zeroed ranges, swapped bytes; and mutations of data.pkl and
// of a storage inside a re-packed archive, so the CRC is valid and the pickle VM / tensor decode see them).
// Every mutant must load or fail with a UsageError: never another exception, a crash or a hang.
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <random>
#include <typeinfo>

#include "checkpoint_test_support.hpp"
#include "nvrtc_runtime/errors.hpp"
#include "pipeline/checkpoint/checkpoint.hpp"
#include "test_helpers.hpp"

namespace fs = std::filesystem;

namespace {

using Rng = std::mt19937_64;

size_t pick(Rng& rng, size_t begin, size_t end) {  // uniform in [begin, end)
  return begin + static_cast<size_t>(rng() % std::max<size_t>(1, end - begin));
}

// One in-place mutation of `bytes[begin, end)`: byte flips, a bit flip, a swap, a zeroed range or a
// truncation, chosen by the RNG.
void mutate(std::string& bytes, size_t begin, size_t end, Rng& rng) {
  if (bytes.empty() || begin >= end) return;
  switch (rng() % 5) {
    case 0:
      for (int n = 1 + static_cast<int>(rng() % 4); n > 0; --n)
        bytes[pick(rng, begin, end)] = static_cast<char>(rng());
      break;
    case 1:
      bytes[pick(rng, begin, end)] ^= static_cast<char>(1u << (rng() % 8));
      break;
    case 2:
      std::swap(bytes[pick(rng, begin, end)], bytes[pick(rng, begin, end)]);
      break;
    case 3: {
      const size_t at = pick(rng, begin, end);
      std::memset(bytes.data() + at, 0, std::min<size_t>(end - at, 1 + rng() % 64));
      break;
    }
    default:
      bytes.resize(pick(rng, begin, end));
      break;
  }
}

struct Outcomes {
  int loaded = 0, rejected = 0;
};

void try_load(const fs::path& file, Outcomes& outcomes, const std::string& what) {
  try {
    lab::load_checkpoint(file);
    ++outcomes.loaded;
  } catch (const lab::UsageError& e) {
    ++outcomes.rejected;
    // One line naming the file.
    if (std::string(e.what()).find('\n') != std::string::npos ||
        std::string(e.what()).rfind(file.string(), 0) != 0)
      FAIL(what << ": message is not one line naming the file: " << e.what());
  } catch (const std::exception& e) {
    FAIL(what << ": unexpected " << typeid(e).name() << ": " << e.what());
  }
}

}  // namespace

TEST_CASE("mutated yolo26n.pt files load or fail with a UsageError", "[checkpoint][fuzz]") {
  const fs::path pt = lab::test::yolo26n_checkpoint();
  if (pt.empty()) {
    WARN("skipped: shared assets absent (" LAB_ASSETS_DIR ")");
    return;
  }
  const auto start = std::chrono::steady_clock::now();
  lab::test::ScratchDir dir("ckpt-fuzz");
  const std::string original = lab::test::read_binary(pt);
  REQUIRE(original.size() > 1000);
  // Central directory start from the end-of-central-directory record (no zip comment in torch files).
  const size_t eocd = original.size() - 22;
  REQUIRE(original.compare(eocd, 4, "PK\x05\x06") == 0);
  uint32_t cd_offset = 0;
  std::memcpy(&cd_offset, original.data() + eocd + 16, 4);
  REQUIRE(cd_offset < eocd);
  const std::string pickle = lab::test::read_zip_member(pt, "yolo26n/data.pkl");
  const std::string storage = lab::test::read_zip_member(pt, "yolo26n/data/213");

  Rng rng(0x5eed2026);
  Outcomes outcomes;
  const fs::path file = dir.path / "mutant.pt";
  int mutants = 0;
  // Raw mutations of the archive bytes.
  for (int i = 0; i < 180; ++i, ++mutants) {
    std::string bytes = original;
    switch (i % 6) {
      case 0:
        bytes.resize(pick(rng, 0, bytes.size()));
        break;  // truncation
      case 1:
      case 2:
        mutate(bytes, cd_offset, bytes.size(), rng);
        break;  // central directory + EOCD
      case 3:
        bytes[pick(rng, 0, bytes.size())] ^= static_cast<char>(1u << (rng() % 8));
        break;  // any bit
      case 4:
        mutate(bytes, 0, bytes.size(), rng);
        break;  // anywhere
      default:
        mutate(bytes, 0, std::min<size_t>(bytes.size(), 400), rng);
        break;  // first local header + pickle
    }
    lab::test::write_binary(file, bytes);
    try_load(file, outcomes, "raw mutant " + std::to_string(i));
  }
  // data.pkl and storage mutations re-packed with valid CRCs: the pickle VM and the tensor decoder see them.
  const fs::path base = dir.path / "base.pt";
  lab::test::write_binary(base, original);
  for (int i = 0; i < 150; ++i, ++mutants) {
    const bool in_pickle = i % 5 != 0;
    std::string member = in_pickle ? pickle : storage;
    for (int n = 1 + static_cast<int>(rng() % 3); n > 0; --n) mutate(member, 0, member.size(), rng);
    fs::copy_file(base, file, fs::copy_options::overwrite_existing);
    lab::test::replace_zip_member(file, in_pickle ? "yolo26n/data.pkl" : "yolo26n/data/213", member);
    try_load(file, outcomes, (in_pickle ? "pickle mutant " : "storage mutant ") + std::to_string(i));
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  INFO(mutants << " mutants: " << outcomes.loaded << " loaded, " << outcomes.rejected << " rejected, "
               << seconds << " s");
  CHECK(mutants >= 300);
  CHECK(outcomes.loaded + outcomes.rejected == mutants);
  CHECK(outcomes.rejected > mutants / 2);
  CHECK(outcomes.loaded > 0);
}
