// Robustness of the checkpoint loaders: >= 300 seeded mutations of the real yolo26n.pt (truncations, flipped
// bytes and bits in the central directory and anywhere, zeroed ranges, swapped bytes; and mutations of
// data.pkl and of a storage inside a re-packed archive, so the CRC is valid and the pickle VM / tensor decode
// see them), 200 of its safetensors conversion (mostly in the JSON header and its length) and 120 of the
// state-dict .pt we write (its data.pkl and a storage, re-packed). Every mutant
// must load or fail with one short line naming the file: never another exception, a crash or a hang.
// LAB_FUZZ_SCALE=N runs N times as many (fuzz_support.hpp).
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <cstring>

#include "tests/checkpoint_test_support.hpp"
#include "tests/fuzz_support.hpp"
#include "pipeline/checkpoint/checkpoint.hpp"
#include "pipeline/checkpoint/torch_checkpoint_writer.hpp"
#include "tests/test_helpers.hpp"

namespace fs = std::filesystem;

namespace {

using lab::test::fuzz::mutate;
using lab::test::fuzz::Outcomes;
using lab::test::fuzz::pick;
using lab::test::fuzz::Rng;

void try_load(const fs::path& file, Outcomes& outcomes, const std::string& what) {
  lab::test::fuzz::expect_clean([&] { lab::load_checkpoint(file); }, file.string(), what, outcomes);
}

// `count` mutants of the archive `base` written to `file`: its `pickle_member` (every `storage_every`-th one
// its `storage_member` instead) mutated one to three times and re-packed with a valid CRC, so the pickle VM
// and the tensor decoder see the mutation; each loaded by try_load.
void repacked_mutants(const fs::path& base, const fs::path& file, const std::string& pickle_member,
                      const std::string& storage_member, int count, int storage_every, Rng& rng,
                      Outcomes& outcomes) {
  const std::string pickle = lab::test::read_zip_member(base, pickle_member);
  const std::string storage = lab::test::read_zip_member(base, storage_member);
  for (int i = 0; i < count; ++i) {
    const bool in_pickle = i % storage_every != 0;
    std::string member = in_pickle ? pickle : storage;
    for (int n = 1 + static_cast<int>(rng() % 3); n > 0; --n) mutate(member, 0, member.size(), rng);
    fs::copy_file(base, file, fs::copy_options::overwrite_existing);
    lab::test::replace_zip_member(file, in_pickle ? pickle_member : storage_member, member);
    try_load(file, outcomes, (in_pickle ? "pickle mutant " : "storage mutant ") + std::to_string(i));
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

  Rng rng(0x5eed2026);
  Outcomes outcomes;
  const double rss_before = lab::test::fuzz::peak_rss_mib();
  const fs::path file = dir.path / "mutant.pt";
  int mutants = 0;
  // Raw mutations of the archive bytes.
  const int raw_count = lab::test::fuzz::scaled_count(180), member_count = lab::test::fuzz::scaled_count(150);
  for (int i = 0; i < raw_count; ++i, ++mutants) {
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
  repacked_mutants(base, file, "yolo26n/data.pkl", "yolo26n/data/213", member_count, 5, rng, outcomes);
  mutants += member_count;
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  INFO(mutants << " mutants: " << outcomes.loaded << " loaded, " << outcomes.rejected << " rejected, "
               << seconds << " s, slowest " << outcomes.slowest_s << " s");
  CHECK(mutants >= 300);
  CHECK(outcomes.loaded + outcomes.rejected == mutants);
  CHECK(outcomes.rejected > mutants / 2);
  CHECK(outcomes.loaded > 0);
  CHECK(lab::test::fuzz::peak_rss_mib() - rss_before < 1024);
}

TEST_CASE("mutated yolo26n.safetensors files load or fail with one line", "[checkpoint][fuzz]") {
  const fs::path pt = lab::test::yolo26n_checkpoint();
  if (pt.empty()) {
    WARN("skipped: shared assets absent (" LAB_ASSETS_DIR ")");
    return;
  }
  lab::test::ScratchDir dir("safetensors-fuzz");
  const fs::path base = dir.path / "base.safetensors";
  lab::save_checkpoint_safetensors(lab::load_checkpoint(pt), base);
  const std::string original = lab::test::read_binary(base);
  uint64_t header_bytes = 0;
  std::memcpy(&header_bytes, original.data(), 8);
  REQUIRE(header_bytes + 8 < original.size());
  const size_t header_end = 8 + static_cast<size_t>(header_bytes);

  Rng rng(0x5afe7e25);
  Outcomes outcomes;
  const fs::path file = dir.path / "mutant.safetensors";
  const double rss_before = lab::test::fuzz::peak_rss_mib();
  const int count = lab::test::fuzz::scaled_count(200);
  for (int i = 0; i < count; ++i) {
    std::string bytes = original;
    switch (i % 8) {
      case 0:
        mutate(bytes, 0, 8, rng);  // the header length
        break;
      case 1: {  // a digit of the header (offsets, shapes) changed to another digit
        const size_t at = bytes.find_first_of("0123456789", pick(rng, 8, header_end));
        if (at < header_end) bytes[at] = static_cast<char>('0' + rng() % 10);
        break;
      }
      case 2: {  // a header byte inserted or removed (the length no longer matches)
        const size_t at = pick(rng, 8, header_end);
        if (rng() % 2 != 0)
          bytes.insert(at, 1, static_cast<char>(rng()));
        else
          bytes.erase(at, 1);
        break;
      }
      case 7:
        mutate(bytes, header_end, bytes.size(), rng);  // the data (and truncations)
        break;
      default:
        for (int n = 1 + static_cast<int>(rng() % 3); n > 0; --n) mutate(bytes, 8, header_end, rng);
        break;
    }
    lab::test::write_binary(file, bytes);
    try_load(file, outcomes, "safetensors mutant " + std::to_string(i));
  }
  INFO(count << " mutants: " << outcomes.loaded << " loaded, " << outcomes.rejected << " rejected, slowest "
             << outcomes.slowest_s << " s");
  CHECK(outcomes.loaded + outcomes.rejected == count);
  CHECK(outcomes.rejected > count / 2);
  CHECK(outcomes.loaded > 0);
  CHECK(lab::test::fuzz::peak_rss_mib() - rss_before < 1024);
}

TEST_CASE("mutated state-dict .pt files (ours) load or fail with one line", "[checkpoint][fuzz]") {
  const fs::path pt = lab::test::yolo26n_checkpoint();
  if (pt.empty()) {
    WARN("skipped: shared assets absent (" LAB_ASSETS_DIR ")");
    return;
  }
  lab::test::ScratchDir dir("state-dict-fuzz");
  const fs::path base = dir.path / "base.pt";
  lab::save_checkpoint_pt(lab::load_checkpoint(pt), base);
  Rng rng(0x57a7ed1c);
  Outcomes outcomes;
  const int count = lab::test::fuzz::scaled_count(120);
  repacked_mutants(base, dir.path / "mutant.pt", "base/data.pkl", "base/data/0", count, 6, rng, outcomes);
  INFO(count << " mutants: " << outcomes.loaded << " loaded, " << outcomes.rejected << " rejected");
  CHECK(outcomes.loaded + outcomes.rejected == count);
  CHECK(outcomes.rejected > count / 3);
  CHECK(outcomes.loaded > 0);
}
