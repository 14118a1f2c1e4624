// Parsing PTX / nvdisasm listings into lines, entries and source locations; entry lookup; interleaving.
#include "nvrtc_runtime/assembly_listing.hpp"

#include <cxxabi.h>

#include <cstdlib>
#include <map>
#include <memory>
#include <regex>
#include <sstream>

#include "nvrtc_runtime/errors.hpp"

namespace lab {

namespace {

bool blank(const std::string& line) {
  return line.find_first_not_of(" \t\r") == std::string::npos;
}

std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

AssemblyListing with_lines(const std::string& text) {
  AssemblyListing l;
  l.lines = split_lines(text);
  l.where.assign(l.lines.size(), {});
  l.marker.assign(l.lines.size(), false);
  return l;
}

AssemblyEntry make_entry(const std::string& mangled, size_t first) {
  return {mangled, demangle(mangled), first, first};
}

// The demangled name without its return type and parameter list: "void f<3>(int)" -> "f<3>".
std::string short_name(const std::string& demangled) {
  int depth = 0;
  size_t start = 0, end = demangled.size();
  for (size_t i = 0; i < demangled.size(); ++i) {
    const char c = demangled[i];
    if (c == '<') ++depth;
    if (c == '>') --depth;
    if (depth != 0) continue;
    if (c == ' ') start = i + 1;
    if (c == '(') {
      end = i;
      break;
    }
  }
  return demangled.substr(start, end - start);
}

std::string without_template_arguments(const std::string& name) {
  return name.substr(0, name.find('<'));
}

}  // namespace

std::string demangle(const std::string& symbol) {
  int status = 0;
  std::unique_ptr<char, void (*)(void*)> out(abi::__cxa_demangle(symbol.c_str(), nullptr, nullptr, &status),
                                             std::free);
  return status == 0 && out ? std::string(out.get()) : symbol;
}

AssemblyListing parse_ptx(const std::string& ptx) {
  AssemblyListing l = with_lines(ptx);
  // Entries are listed; device functions that were not inlined (.func) get their line information too.
  static const std::regex function_re(
      R"(^\s*(?:\.visible\s+|\.weak\s+)?\.(entry|func)\s+(?:\([^)]*\)\s*)?([A-Za-z0-9_$]+))");
  static const std::regex loc_re(R"(^\s*\.loc\s+(\d+)\s+(\d+))");
  static const std::regex file_re(R"(^\s*\.file\s+(\d+)\s+\"([^\"]*)\")");
  std::map<int, std::string> files;  // .file directives come after the code: resolve in a second pass
  std::vector<std::pair<int, int>> loc(l.lines.size(), {0, 0});
  std::pair<int, int> current{0, 0};
  bool in_header = false, in_body = false, is_entry = false;
  std::smatch m;
  for (size_t i = 0; i < l.lines.size(); ++i) {
    const std::string& line = l.lines[i];
    if (std::regex_search(line, m, function_re)) {
      is_entry = m[1] == "entry";
      if (is_entry) l.entries.push_back(make_entry(m[2], i));
      in_header = true;  // a declaration without body ends at the next function line
      current = {0, 0};
    } else if (in_header && line == "{") {
      in_body = true;
      in_header = false;
    } else if (in_body && line == "}") {
      if (is_entry) l.entries.back().last = i + 1;
      in_body = false;
      current = {0, 0};
      continue;
    } else if (std::regex_search(line, m, loc_re)) {
      current = {std::stoi(m[1]), std::stoi(m[2])};
      l.marker[i] = true;
    } else if (std::regex_search(line, m, file_re)) {
      files[std::stoi(m[1])] = m[2];
    }
    if (in_body && !blank(line)) loc[i] = current;
  }
  for (size_t i = 0; i < l.lines.size(); ++i) {
    const auto f = files.find(loc[i].first);
    if (f != files.end() && loc[i].second > 0) l.where[i] = {f->second, loc[i].second};
  }
  return l;
}

AssemblyListing parse_sass(const std::string& sass) {
  AssemblyListing l = with_lines(sass);
  static const std::regex section_re(R"(^//-+ \.text\.(\S+))");
  static const std::regex other_section_re(R"(^//-+ )");
  static const std::regex file_re(R"(^\s*//## File \"([^\"]*)\", line (\d+))");
  SourceLine current;
  std::smatch m;
  const auto close_entry = [&](size_t i) {
    if (!l.entries.empty() && l.entries.back().last == l.entries.back().first) l.entries.back().last = i;
  };
  for (size_t i = 0; i < l.lines.size(); ++i) {
    const std::string& line = l.lines[i];
    if (std::regex_search(line, m, section_re)) {
      close_entry(i);
      l.entries.push_back(make_entry(m[1], i));
      current = {};
    } else if (std::regex_search(line, m, other_section_re)) {
      close_entry(i);
      current = {};
    } else if (std::regex_search(line, m, file_re)) {
      current = {m[1], std::stoi(m[2])};
      l.marker[i] = true;
    }
    if (!blank(line)) l.where[i] = current;
  }
  close_entry(l.lines.size());
  return l;
}

void use_tree_paths(AssemblyListing& listing, const std::vector<std::string>& tree_files) {
  std::map<std::string, std::string> renamed;
  for (SourceLine& w : listing.where) {
    if (w.file.empty()) continue;
    auto it = renamed.find(w.file);
    if (it == renamed.end()) {
      std::string best = w.file;
      size_t best_size = 0;
      for (const std::string& f : tree_files) {
        const bool tail = w.file.size() > f.size() && w.file.compare(w.file.size() - f.size(), f.size(), f) == 0 &&
                          w.file[w.file.size() - f.size() - 1] == '/';
        if ((w.file == f || tail) && f.size() > best_size) {
          best = f;
          best_size = f.size();
        }
      }
      it = renamed.emplace(w.file, best).first;
    }
    w.file = it->second;
  }
}

const AssemblyEntry& find_entry(const AssemblyListing& listing, const std::string& name) {
  std::vector<const AssemblyEntry*> by_base;
  for (const AssemblyEntry& e : listing.entries) {
    if (e.mangled == name || e.demangled == name || short_name(e.demangled) == name) return e;
    if (without_template_arguments(short_name(e.demangled)) == name) by_base.push_back(&e);
  }
  if (by_base.size() == 1) return *by_base.front();
  std::string known;
  for (const AssemblyEntry& e : listing.entries)
    if (by_base.empty() || without_template_arguments(short_name(e.demangled)) == name)
      known += (known.empty() ? "" : ", ") + short_name(e.demangled);
  throw UsageError("--entry '" + name + "' " + (by_base.empty() ? "names no entry point" : "is ambiguous") +
                   " (entries: " + known + ")");
}

AssemblyListing entry_listing(const AssemblyListing& module, const AssemblyEntry& entry) {
  AssemblyListing l;
  l.lines.assign(module.lines.begin() + long(entry.first), module.lines.begin() + long(entry.last));
  l.where.assign(module.where.begin() + long(entry.first), module.where.begin() + long(entry.last));
  l.marker.assign(module.marker.begin() + long(entry.first), module.marker.begin() + long(entry.last));
  l.entries.push_back({entry.mangled, entry.demangled, 0, l.lines.size()});
  return l;
}

std::vector<size_t> lines_from(const AssemblyListing& listing, const SourceLine& source) {
  std::vector<size_t> out;
  for (size_t i = 0; i < listing.lines.size(); ++i)
    if (!listing.marker[i] && listing.where[i] == source) out.push_back(i);
  return out;
}

std::string render_listing(const AssemblyListing& listing, const ReadSource* read_source) {
  std::map<std::string, std::vector<std::string>> sources;
  const auto source_text = [&](const SourceLine& s) -> std::string {
    auto it = sources.find(s.file);
    if (it == sources.end()) it = sources.emplace(s.file, split_lines((*read_source)(s.file))).first;
    return s.line <= int(it->second.size()) ? it->second[size_t(s.line - 1)] : "";
  };
  std::ostringstream out;
  SourceLine shown;
  auto entry = listing.entries.begin();
  for (size_t i = 0; i < listing.lines.size(); ++i) {
    for (; entry != listing.entries.end() && entry->first == i; ++entry) out << "// " << entry->demangled << "\n";
    if (read_source) {
      if (listing.marker[i]) continue;
      const SourceLine& s = listing.where[i];
      if (s.line > 0 && !(s == shown)) {
        out << "// " << s.file << ":" << s.line << ": " << source_text(s) << "\n";
        shown = s;
      }
    }
    out << listing.lines[i] << "\n";
  }
  return out.str();
}

}  // namespace lab
