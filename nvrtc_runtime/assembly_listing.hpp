// PTX and SASS listings with their source-line map, the plain logic behind `lab source --entry/--interleave`
// and the viewer's source <-> assembly highlighting: the entry points of a module (demangled), one entry's
// lines, the source line each assembly line came from (PTX `.loc` + `.file` from -lineinfo, or nvdisasm -g's
// `//## File "...", line N` comments), and the interleaved text.
#pragma once
#include <functional>
#include <string>
#include <vector>

namespace lab {

struct SourceLine {
  std::string file;  // as the compiler named it: the kernel-tree path of the .cu or header
  int line = 0;      // 1-based; 0: no source line
  bool operator==(const SourceLine&) const = default;
};

struct AssemblyEntry {
  std::string mangled;    // the symbol, e.g. _Z21flash_attn2_fwd_tiledILi64EEvPKf...
  std::string demangled;  // e.g. void flash_attn2_fwd_tiled<64>(float const*, ...)
  size_t first = 0;       // its lines: [first, last) of the module listing
  size_t last = 0;
};

struct AssemblyListing {
  std::vector<std::string> lines;
  std::vector<SourceLine> where;  // per line: the source line it was generated from (line 0: none)
  std::vector<bool> marker;       // per line: a line-information directive (.loc / //## File), no code
  std::vector<AssemblyEntry> entries;
};

AssemblyListing parse_ptx(const std::string& ptx);
AssemblyListing parse_sass(const std::string& sass);  // nvdisasm -c -g output

// NVRTC names files by the working directory of the compile plus the tree path: rewrites each `where` file
// to the longest of `tree_files` that it ends with (at a '/'), so it names a kernel-tree file again.
void use_tree_paths(AssemblyListing& listing, const std::vector<std::string>& tree_files);

// The C++ ABI demangling of a symbol (abi::__cxa_demangle); extern "C" names come back unchanged.
std::string demangle(const std::string& symbol);

// The entry named `name`: its mangled or demangled symbol, the demangled name without return type and
// parameters ("flash_attn2_fwd_tiled<64>"), or that name without template arguments when only one entry has
// it. Throws UsageError (one line naming `name` and the candidates) when none or several match.
const AssemblyEntry& find_entry(const AssemblyListing& listing, const std::string& name);

// The lines of one entry, line information kept.
AssemblyListing entry_listing(const AssemblyListing& module, const AssemblyEntry& entry);

// Indices of the assembly lines generated from `source` (what the viewer highlights for a source line).
std::vector<size_t> lines_from(const AssemblyListing& listing, const SourceLine& source);

// The listing as text, each entry preceded by a `// <demangled name>` line. With `read_source` (a file's text,
// "" when unknown) interleaved: each source line (`// file:line: text`) followed by the assembly lines
// generated from it, in assembly order, the line-information directives themselves dropped.
using ReadSource = std::function<std::string(const std::string& file)>;
std::string render_listing(const AssemblyListing& listing, const ReadSource* read_source = nullptr);

}  // namespace lab
