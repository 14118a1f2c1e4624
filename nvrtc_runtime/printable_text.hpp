// Untrusted text (file names, pickle class names, label lines, JSON header values) made safe to print in a
// one-line message: control characters, DEL, C1 controls and bytes that are not UTF-8 become escapes, so a
// name cannot move the cursor, recolour the terminal or forge extra "lab:" lines; long text is cut short.
#pragma once
#include <cstddef>
#include <filesystem>
#include <string>
#include <string_view>

namespace lab {

// `text` with \n, \r, \t and every other control byte, DEL, C1 control (U+0080..U+009F) or byte outside a
// valid UTF-8 sequence written as a C escape (\n, \x1b ...); printable ASCII and valid UTF-8 are kept, a
// backslash too, so printable(printable(x)) == printable(x) and a message can be escaped again on its way
// out. Text longer than `max_bytes` is cut there and ends in "...(N bytes)".
std::string printable(std::string_view text, size_t max_bytes = std::string_view::npos);
// printable(path.string()): a file name as it appears in messages.
std::string printable_path(const std::filesystem::path& path);

}  // namespace lab
