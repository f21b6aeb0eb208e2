// Reading JSON files with errors that name the file and line, and writing files atomically
// (temporary file in the same folder, then rename) so no reader ever sees half a file.
#pragma once

#include <filesystem>
#include <string>

#include "core/json_cursor.h"

namespace eth {

// Parses `path`; a missing file or a syntax error throws InputError(component, path, ...).
Json read_json_file(const std::filesystem::path& path, const std::string& component);
// Parses text already in memory; `source` names it in errors.
Json parse_json_text(const std::string& text, const std::string& source,
                     const std::string& component);

// Writes `content` to `path` through a temporary sibling and rename(2).
void write_file_atomic(const std::filesystem::path& path, const std::string& content);
std::string read_text_file(const std::filesystem::path& path, const std::string& component);

}  // namespace eth
