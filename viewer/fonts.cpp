// Font atlas set-up and the glyph coverage check the code editor reports.
#include "viewer/fonts.hpp"

#include <filesystem>
#include <iostream>

#include <imgui.h>
#include <imgui_internal.h>

namespace lab::viewer {

namespace {

// Unicode blocks merged from the TTF (pairs of first, last; zero-terminated, alive as long as the atlas).
const ImWchar kExtraRanges[] = {
    0x0100, 0x024F,  // Latin Extended-A and -B
    0x0370, 0x03FF,  // Greek
    0x2000, 0x206F,  // General Punctuation: dashes, quotes, ellipsis
    0x2070, 0x20CF,  // super- and subscripts, currency
    0x2100, 0x214F,  // letterlike symbols
    0x2190, 0x23FF,  // arrows, mathematical operators, miscellaneous technical
    0x2500, 0x25FF,  // box drawing, block elements, geometric shapes
    0,
};

}  // namespace

void load_fonts() {
  // The built-in font is 13 px with a 7 px advance: the merged glyphs take the same cell.
  constexpr float kSize = 13.0f, kAdvance = 7.0f;
  ImGuiIO& io = ImGui::GetIO();
  ImFontConfig base;
  base.SizePixels = kSize;
  io.Fonts->AddFontDefault(&base);
  const std::filesystem::path ttf = LAB_MONO_FONT;
  if (!std::filesystem::exists(ttf)) {
    std::cerr << "lab-viewer: " << ttf.string()
              << " is missing (Debian package fonts-dejavu-core): characters beyond Latin-1 show as '?'\n";
    return;
  }
  ImFontConfig merge;
  merge.MergeMode = true;
  merge.PixelSnapH = true;
  merge.GlyphMinAdvanceX = merge.GlyphMaxAdvanceX = kAdvance;
  io.Fonts->AddFontFromFileTTF(ttf.c_str(), kSize, &merge, kExtraRanges);
}

int characters_without_glyph(const std::string& text) {
  const ImFont* font = ImGui::GetFont();
  int missing = 0;
  const char* end = text.data() + text.size();
  for (const char* p = text.data(); p < end;) {
    unsigned int c = 0;
    p += ImTextCharFromUtf8(&c, p, end);
    if (c >= 0x20 && !font->FindGlyphNoFallback(static_cast<ImWchar>(c))) ++missing;
  }
  return missing;
}

}  // namespace lab::viewer
