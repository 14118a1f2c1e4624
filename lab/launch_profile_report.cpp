// Sums a launch profile per kernel instance and prints it.
#include "lab/launch_profile_report.hpp"

#include <algorithm>
#include <map>

#include "lab/table.hpp"

namespace lab {

std::vector<KernelTotal> kernel_totals(const std::vector<LaunchSample>& samples) {
  std::map<std::string, KernelTotal> by_name;
  for (const LaunchSample& s : samples) {
    KernelTotal& t = by_name[s.kernel];
    t.kernel = s.kernel;
    ++t.launches;
    t.ms += s.ms;
    t.blocks += s.blocks;
  }
  std::vector<KernelTotal> totals;
  for (auto& [name, t] : by_name) totals.push_back(std::move(t));
  std::stable_sort(totals.begin(), totals.end(),
                   [](const KernelTotal& a, const KernelTotal& b) { return a.ms > b.ms; });
  return totals;
}

namespace {

double sum_ms(const std::vector<KernelTotal>& totals) {
  double sum = 0;
  for (const KernelTotal& t : totals) sum += t.ms;
  return sum;
}

int sum_launches(const std::vector<KernelTotal>& totals) {
  int sum = 0;
  for (const KernelTotal& t : totals) sum += t.launches;
  return sum;
}

}  // namespace

void print_launch_profile(std::ostream& os, const std::vector<KernelTotal>& totals, size_t rows,
                          double span_ms) {
  const double total = sum_ms(totals);
  const auto share = [&](double ms) { return format_fixed(total > 0 ? 100 * ms / total : 0, 1) + " %"; };
  Table table({"kernel", "launches", "time", "share", "mean", "mean CTAs"});
  for (size_t i = 0; i < totals.size() && i < rows; ++i) {
    const KernelTotal& t = totals[i];
    table.add({t.kernel, std::to_string(t.launches), format_ms(t.ms), share(t.ms), format_ms(t.ms / t.launches),
               t.blocks ? std::to_string(t.blocks / (unsigned long long)t.launches) : "-"});
  }
  if (totals.size() > rows) {
    const std::vector<KernelTotal> rest(totals.begin() + std::ptrdiff_t(rows), totals.end());
    table.add({std::to_string(rest.size()) + " more kernels", std::to_string(sum_launches(rest)),
               format_ms(sum_ms(rest)), share(sum_ms(rest)), "", ""});
  }
  table.print(os, "  ");
  os << "  " << sum_launches(totals) << " launches, copies and fills, " << format_ms(total) << " summed, "
     << format_ms(span_ms)
     << " for the whole work (above the sum by host work and gaps between launches, below it where lanes "
        "overlapped)\n";
}

nlohmann::json launch_profile_json(const std::vector<LaunchSample>& samples, double span_ms,
                                   LaunchProfileTiming timing) {
  const std::vector<KernelTotal> totals = kernel_totals(samples);
  nlohmann::json rows = nlohmann::json::array(), launches = nlohmann::json::array();
  for (const KernelTotal& t : totals)
    rows.push_back({{"kernel", t.kernel}, {"launches", t.launches}, {"ms", t.ms}, {"ctas", t.blocks}});
  for (const LaunchSample& s : samples)
    launches.push_back(
        {{"kernel", s.kernel}, {"ctas", s.blocks}, {"ms", s.ms}, {"start_ms", s.start_ms}, {"lane", s.lane}});
  return {{"timing", timing == LaunchProfileTiming::Alone ? "alone" : "as launched"},
          {"span_ms", span_ms},
          {"launch_ms", sum_ms(totals)},
          {"kernels", rows},
          {"launches", launches}};
}

}  // namespace lab
