// The stage profile's sums and its report.
#include "pipeline/detect/stage_profile.hpp"

#include <cstdio>
#include <vector>

namespace lab {
namespace {

const char* stage_name(Stage s) {
  static const char* const names[kStageCount] = {"decode", "letterbox", "draw",    "encode", "gpu encode",
                                                 "write",  "upload",    "forward", "top-k"};
  return names[size_t(s)];
}

struct Group {
  const char* name;
  int threads;
  std::vector<Stage> stages;
};

}  // namespace

void StageProfile::add(Stage stage, double ms) {
  std::lock_guard lock(mutex_);
  total_ms_[size_t(stage)] += ms;
}

std::string StageProfile::report(size_t images, int host_threads, int forward_threads, int writer_threads) const {
  std::array<double, kStageCount> totals;
  {
    std::lock_guard lock(mutex_);
    totals = total_ms_;
  }
  const double n = images > 0 ? double(images) : 1.0;
  const Group groups[] = {{"host workers",
                           host_threads,
                           {Stage::Decode, Stage::Letterbox, Stage::Draw, Stage::Encode, Stage::GpuEncode}},
                          {"forward workers", forward_threads, {Stage::Upload, Stage::Forward, Stage::TopK}},
                          {"writer threads", writer_threads, {Stage::Write}}};
  std::string text = "Stages (busy ms per image, summed over each group's threads):\n";
  const Group* critical = nullptr;
  Stage critical_stage = Stage::Decode;
  double lowest_rate = 0;
  for (const Group& g : groups) {
    double sum = 0, largest = -1;
    Stage largest_stage = g.stages.front();
    char line[96];
    std::string parts;
    for (Stage s : g.stages) {
      if (s == Stage::GpuEncode && totals[size_t(s)] == 0) continue;
      const double per_image = totals[size_t(s)] / n;
      sum += per_image;
      if (per_image > largest) largest = per_image, largest_stage = s;
      std::snprintf(line, sizeof line, "%s%s %.3f", parts.empty() ? "" : ", ", stage_name(s), per_image);
      parts += line;
    }
    const double rate = sum > 0 ? g.threads * 1000.0 / sum : 0;
    std::snprintf(line, sizeof line, " = %.3f ms -> at most %.0f images/s\n", sum, rate);
    text += "  " + std::string(g.name) + " (" + std::to_string(g.threads) + (g.threads == 1 ? " thread" : " threads") +
            "): " + parts + line;
    if (sum > 0 && (!critical || rate < lowest_rate)) critical = &g, lowest_rate = rate, critical_stage = largest_stage;
  }
  if (critical)
    text += "  critical: " + std::string(critical->name) + ", largest stage " + stage_name(critical_stage) + "\n";
  return text;
}

}  // namespace lab
