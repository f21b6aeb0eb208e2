#include "core/json_file.h"

#include <cstdio>
#include <fstream>
#include <sstream>
#include <unistd.h>

#include "core/error.h"

namespace eth {

std::string read_text_file(const std::filesystem::path& path, const std::string& component) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) {
    throw InputError(component, path.string(), "", "cannot read: no such file");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(component, path.string(), "", "cannot open for reading");
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

Json parse_json_text(const std::string& text, const std::string& source,
                     const std::string& component) {
  try {
    return Json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    // Translate the byte offset into line:column, which is what an editor shows.
    std::size_t line = 1, col = 1;
    for (std::size_t i = 0; i < text.size() && i + 1 < e.byte; ++i) {
      if (text[i] == '\n') {
        ++line;
        col = 1;
      } else {
        ++col;
      }
    }
    std::string what = e.what();
    auto pos = what.find("syntax error");
    std::string reason = pos == std::string::npos ? what : what.substr(pos);
    throw InputError(component, source, "",
                     "invalid JSON at line " + std::to_string(line) + ", column " +
                         std::to_string(col) + ": " + reason);
  } catch (const nlohmann::json::exception& e) {
    // e.g. a number too large for a double ("1e400"): still the file's fault, not ours.
    throw InputError(component, source, "", std::string("invalid JSON: ") + e.what());
  }
}

Json read_json_file(const std::filesystem::path& path, const std::string& component) {
  return parse_json_text(read_text_file(path, component), path.string(), component);
}

void write_file_atomic(const std::filesystem::path& path, const std::string& content) {
  std::filesystem::path dir = path.parent_path();
  if (!dir.empty()) std::filesystem::create_directories(dir);
  std::filesystem::path tmp = path;
  tmp += ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) throw InputError("io", path.string(), "", "cannot open for writing");
    out.write(content.data(), static_cast<std::streamsize>(content.size()));
    out.flush();
    if (!out) {
      std::filesystem::remove(tmp);
      throw InputError("io", path.string(), "", "write failed (disk full?)");
    }
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::filesystem::remove(tmp);
    throw InputError("io", path.string(), "", "cannot rename into place: " + ec.message());
  }
}

}  // namespace eth
