// The viewer's font: Dear ImGui's built-in font (ASCII and Latin-1) with the glyphs of DejaVu Sans Mono merged
// in for the characters kernel sources use beyond it (em dashes, arrows, Greek, maths, box drawing), kept at
// the built-in font's advance so the code editor stays monospaced.
#pragma once
#include <string>

namespace lab::viewer {

// Builds the font atlas; call once after ImGui::CreateContext. Without the TTF (LAB_MONO_FONT) the built-in
// font alone is used and says so on standard error.
void load_fonts();

// Characters of the UTF-8 `text` the font has no glyph for (ImGui draws them as '?').
int characters_without_glyph(const std::string& text);

}  // namespace lab::viewer
