// Reading JSON input with bounds: every file ETH reads (plans, clusters, models, profiles, Metis
// files, checkpoint headers) goes through parse_json_text, which refuses, by name and before any
// value is built past the limit:
//   - a text longer than JsonLimits::max_bytes (64 MiB);
//   - nesting deeper than JsonLimits::max_depth (64), anywhere, free-form fields included;
//   - a key that appears twice in one object (named by its JSON path);
//   - bytes that are not UTF-8, NUL bytes and escaped NULs (\u0000), by byte offset;
// and reports syntax errors with line, column and byte offset. Messages are made printable and
// short (error.h: message_text), whatever the input holds. Not a schema: the loaders state their
// fields with JsonCursor.
#pragma once

#include <cstddef>
#include <filesystem>
#include <string>
#include <vector>

#include "core/atomic_file.h"
#include "core/json_cursor.h"

namespace eth {

inline constexpr std::size_t kMaxJsonBytes = std::size_t{64} << 20;
inline constexpr int kMaxJsonDepth = 64;

struct JsonLimits {
  std::size_t max_bytes = kMaxJsonBytes;
  int max_depth = kMaxJsonDepth;  // containers inside containers; the root object is depth 1
};

// Parses `path`; a missing or unreadable file, one that is not a regular file, or any of the
// problems above throws InputError(component, path, ...).
Json read_json_file(const std::filesystem::path& path, const std::string& component,
                    const JsonLimits& limits = {});
// Parses text already in memory; `source` names it in errors.
Json parse_json_text(const std::string& text, const std::string& source,
                     const std::string& component, const JsonLimits& limits = {});

// The whole of a regular file of at most max_bytes; InputError(component, path, ...) otherwise
// (missing, a folder, a FIFO or device, too large, unreadable).
std::string read_text_file(const std::filesystem::path& path, const std::string& component,
                           std::size_t max_bytes = kMaxJsonBytes);

// The regular files of folder `dir` (symbolic links followed), sorted by name; InputError when
// `dir` is not a folder or cannot be listed.
std::vector<std::filesystem::path> list_regular_files(const std::filesystem::path& dir,
                                                      const std::string& component);

}  // namespace eth
