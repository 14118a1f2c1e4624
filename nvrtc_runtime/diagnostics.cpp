// Compiler-log parsing and diagnostic formatting.
#include "nvrtc_runtime/diagnostics.hpp"

#include <algorithm>
#include <regex>
#include <sstream>

#include "nvrtc_runtime/kernel_tree.hpp"

namespace lab {
namespace {

std::string strip(std::string path, const std::string& prefix) {
  if (!prefix.empty() && path.rfind(prefix, 0) == 0) path = path.substr(prefix.size());
  return path;
}

std::string line_of(const std::string& text, int line) {
  std::istringstream in(text);
  std::string s;
  for (int i = 1; std::getline(in, s); ++i)
    if (i == line) return s;
  return {};
}

}  // namespace

std::vector<Diagnostic> parse_compiler_log(const std::string& log, const std::string& strip_prefix) {
  static const std::regex nvrtc_re(
      R"(^(.+?)\((\d+)\): (error|warning|remark|note|catastrophic error): (.*)$)");
  static const std::regex gcc_re(R"(^(.+?):(\d+):(\d+): (fatal error|error|warning|note): (.*)$)");
  static const std::regex caret_re(R"(^(\s*)\^\s*$)");
  std::vector<Diagnostic> out;
  std::istringstream in(log);
  std::string line;
  std::vector<std::string> lines;
  while (std::getline(in, line)) lines.push_back(line);
  for (size_t i = 0; i < lines.size(); ++i) {
    std::smatch m;
    Diagnostic d;
    if (std::regex_match(lines[i], m, gcc_re)) {
      d = {strip(m[1], strip_prefix), std::stoi(m[2]), std::stoi(m[3]), m[4], m[5]};
    } else if (std::regex_match(lines[i], m, nvrtc_re)) {
      d = {strip(m[1], strip_prefix), std::stoi(m[2]), 0, m[3], m[4]};
      // NVRTC echoes the source line indented by two spaces, then a caret under the offending column.
      std::smatch c;
      if (i + 2 < lines.size() && std::regex_match(lines[i + 2], c, caret_re))
        d.column = std::max(1, int(c[1].length()) - 2 + 1);
    } else {
      continue;
    }
    if (d.severity == "fatal error" || d.severity == "catastrophic error") d.severity = "error";
    out.push_back(d);
  }
  return out;
}

std::string format_diagnostics(const std::vector<Diagnostic>& diags, const KernelTree* tree) {
  std::ostringstream s;
  for (const auto& d : diags) {
    s << d.file << ":" << d.line << ":" << d.column << ": " << d.severity << ": " << d.message << "\n";
    if (tree && d.line > 0 && tree->exists(d.file)) {
      std::string src = line_of(tree->read(d.file), d.line);
      s << "  " << d.line << " | " << src << "\n";
      if (d.column > 0)
        s << "  " << std::string(std::to_string(d.line).size(), ' ') << " | "
          << std::string(d.column - 1, ' ') << "^\n";
    }
  }
  return s.str();
}

bool has_errors(const std::vector<Diagnostic>& diags) {
  for (const auto& d : diags)
    if (d.severity == "error") return true;
  return false;
}

}  // namespace lab
