// The PTX and SASS tabs of the Kernels panel: the source file and the assembly side by side; a selected
// source line highlights the assembly lines generated from it, and a clicked assembly line selects (and
// highlights) the source line it came from. The mapping is the one `lab source --interleave` prints
// (nvrtc_runtime/assembly_listing.hpp).
#pragma once
#include <functional>
#include <string>

#include "nvrtc_runtime/assembly_listing.hpp"

namespace lab::viewer {

// The selection shared by both tabs and the editor, and the scroll requests of the next frame.
struct AssemblySelection {
  SourceLine source;            // the selected source line (tree path, 1-based); line 0: none
  bool scroll_source = false;   // bring the source line into view
  bool scroll_assembly = false; // bring the first highlighted assembly line into view
};

// Selects `source`; both panes scroll to it.
void select_source_line(AssemblySelection& selection, const SourceLine& source);
// Selects the source line that assembly line `index` (0-based) of `listing` came from; false when the line
// has no source line.
bool select_assembly_line(AssemblySelection& selection, const AssemblyListing& listing, size_t index);

// Draws the two panes. `kind` is "PTX" or "SASS"; `read_source` gives a tree file's text; `default_file` is
// shown while nothing is selected. Returns true when the user changed the selection.
bool draw_assembly_view(const char* kind, const AssemblyListing& listing, const std::string& default_file,
                        const std::function<std::string(const std::string&)>& read_source,
                        AssemblySelection& selection);

}  // namespace lab::viewer
