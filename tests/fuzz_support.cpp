// Shared fuzz machinery (see fuzz_support.hpp).
#include "tests/fuzz_support.hpp"

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <typeinfo>

#include <catch2/catch.hpp>

#include "nvrtc_runtime/errors.hpp"

namespace lab::test::fuzz {

size_t pick(Rng& rng, size_t begin, size_t end) {
  return begin + static_cast<size_t>(rng() % std::max<size_t>(1, end - begin));
}

void mutate(std::string& bytes, size_t begin, size_t end, Rng& rng) {
  end = std::min(end, bytes.size());
  if (begin >= end) return;
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

int scaled_count(int ci_count) {
  const char* scale = std::getenv("LAB_FUZZ_SCALE");
  const int factor = scale != nullptr ? std::atoi(scale) : 1;
  return ci_count * std::max(1, factor);
}

void expect_clean(const std::function<void()>& load, const std::string& prefix, const std::string& what,
                  Outcomes& outcomes) {
  const auto start = std::chrono::steady_clock::now();
  try {
    load();
    ++outcomes.loaded;
  } catch (const UsageError& e) {
    ++outcomes.rejected;
    const std::string message = e.what();
    if (message.find('\n') != std::string::npos || message.rfind(prefix, 0) != 0 ||
        message.size() > kMaxMessageBytes)
      FAIL(what << ": the message is not one short line starting with " << prefix << ": " << message);
  } catch (const std::exception& e) {
    FAIL(what << ": unexpected " << typeid(e).name() << ": " << e.what());
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  outcomes.slowest_s = std::max(outcomes.slowest_s, seconds);
  if (seconds > kMaxSecondsPerCase) FAIL(what << ": took " << seconds << " s");
}

double peak_rss_mib() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return double(usage.ru_maxrss) / 1024.0;  // ru_maxrss is in KiB on Linux
}

}  // namespace lab::test::fuzz
