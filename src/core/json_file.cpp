// The bounded JSON reader (json_file.h): a pre-scan for NUL and invalid UTF-8 (byte offsets),
// then nlohmann's SAX parser driving a DOM builder of our own that enforces the depth limit and
// refuses duplicate keys while it tracks the JSON path. The builder is ours rather than
// nlohmann's callback parser because that one rescans the parent container after every object
// (quadratic in an array of objects) and lets a duplicate key silently overwrite the first.
#include "core/json_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>
#include <unordered_set>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace eth {

namespace {

// "line 3, column 7 (byte offset 42)" of byte `offset` of `text` (1-based line and column).
std::string where_in(const std::string& text, std::size_t offset) {
  std::size_t line = 1, col = 1;
  for (std::size_t i = 0; i < text.size() && i < offset; ++i) {
    if (text[i] == '\n') {
      ++line;
      col = 1;
    } else {
      ++col;
    }
  }
  return "line " + std::to_string(line) + ", column " + std::to_string(col) + " (byte offset " +
         std::to_string(offset) + ")";
}

// NUL bytes, escaped NULs and bytes that are not UTF-8, with where they are. A backslash can
// only stand inside a string in valid JSON, so stepping over escape pairs finds every "\u0000".
void scan_bytes(const std::string& text, const std::string& source, const std::string& component) {
  for (std::size_t i = 0; i < text.size();) {
    const char c = text[i];
    if (c == '\0') {
      throw InputError(component, source, "", "NUL byte at " + where_in(text, i));
    }
    if (c == '\\' && i + 1 < text.size()) {
      if (text.compare(i + 1, 5, "u0000") == 0) {
        throw InputError(component, source, "",
                         "escaped NUL (\\u0000) in a string at " + where_in(text, i) +
                             "; names and values must not hold NUL characters");
      }
      i += 2;
      continue;
    }
    const std::size_t n = utf8_sequence_length(text, i);
    if (n == 0) {
      throw InputError(component, source, "",
                       "invalid UTF-8 at " + where_in(text, i) + ": byte " +
                           message_text(text.substr(i, 1)) + " does not start a valid sequence");
    }
    i += n;
  }
}

// Builds the document from nlohmann's SAX events. Pointers on `open_` stay valid: a value is only
// ever appended to the innermost open container, so no open container's parent grows.
class BoundedBuilder {
 public:
  BoundedBuilder(const std::string& text, const std::string& source, const std::string& component,
                 const JsonLimits& limits)
      : text_(text), source_(source), component_(component), limits_(limits) {}

  Json& root() { return root_; }
  std::optional<InputError>& error() { return error_; }

  bool null() { return put(Json(nullptr)); }
  bool boolean(bool v) { return put(Json(v)); }
  bool number_integer(Json::number_integer_t v) { return put(Json(v)); }
  bool number_unsigned(Json::number_unsigned_t v) { return put(Json(v)); }
  bool number_float(Json::number_float_t v, const Json::string_t&) { return put(Json(v)); }
  bool string(Json::string_t& v) { return put(Json(std::move(v))); }
  bool binary(Json::binary_t&) { return fail("", "binary values are not JSON"); }

  bool start_object(std::size_t) { return open(Json::object()); }
  bool start_array(std::size_t) { return open(Json::array()); }
  bool end_object() { return close(); }
  bool end_array() { return close(); }

  bool key(Json::string_t& k) {
    Frame& f = frames_.back();
    if (!f.keys.insert(k).second) {
      return fail(json_path_join(path(frames_.size() - 1), k),
                  "duplicate key \"" + message_text(k, 64) +
                      "\": each field may appear once per object");
    }
    f.key = std::move(k);
    return true;
  }

  bool parse_error(std::size_t position, const std::string&, const nlohmann::json::exception& e) {
    std::string what = e.what();
    for (const char* marker : {"syntax error", "number overflow"}) {
      if (const auto pos = what.find(marker); pos != std::string::npos) {
        what = what.substr(pos);
        break;
      }
    }
    // The lexer counts the byte it stopped at; point at it, not past it.
    const std::size_t at = position > 0 ? position - 1 : 0;
    return fail("", "invalid JSON at " + where_in(text_, at) + ": " + message_text(what, 300));
  }

 private:
  struct Frame {
    Json* value = nullptr;
    bool array = false;
    std::size_t count = 0;  // arrays: elements started so far
    std::string key;        // objects: the key of the element being read
    std::unordered_set<std::string> keys;
  };

  // The JSON path of the element being read inside the first `depth` open containers.
  std::string path(std::size_t depth) const {
    std::string p;
    for (std::size_t i = 0; i < depth; ++i) {
      const Frame& f = frames_[i];
      if (f.array) {
        p += "[" + std::to_string(f.count - 1) + "]";
      } else {
        p = json_path_join(p, f.key);
      }
    }
    return p;
  }

  bool fail(const std::string& at, const std::string& detail) {
    if (!error_) error_.emplace(component_, source_, at, detail);
    return false;
  }

  // Where the next value goes: the root, the next array element, or the pending key's slot.
  Json* slot(Json&& v) {
    if (frames_.empty()) {
      root_ = std::move(v);
      return &root_;
    }
    Frame& f = frames_.back();
    if (f.array) {
      ++f.count;
      auto& arr = f.value->get_ref<Json::array_t&>();
      arr.push_back(std::move(v));
      return &arr.back();
    }
    // Uniqueness was checked in key(); append without ordered_map's linear search.
    auto& obj = f.value->get_ref<Json::object_t&>();
    obj.Container::emplace_back(f.key, std::move(v));  // f.key still names deeper paths
    return &obj.Container::back().second;
  }

  bool put(Json&& v) {
    slot(std::move(v));
    return true;
  }

  bool open(Json&& container) {
    const bool array = container.is_array();
    if (frames_.size() >= static_cast<std::size_t>(limits_.max_depth)) {
      if (!frames_.empty() && frames_.back().array) ++frames_.back().count;
      return fail(path(frames_.size()), "nesting deeper than " +
                                            std::to_string(limits_.max_depth) +
                                            " levels of arrays and objects (the most ETH reads)");
    }
    Json* v = slot(std::move(container));
    frames_.push_back(Frame{v, array, 0, "", {}});
    return true;
  }

  bool close() {
    frames_.pop_back();
    return true;
  }

  const std::string& text_;
  const std::string& source_;
  const std::string& component_;
  JsonLimits limits_;
  Json root_;
  std::vector<Frame> frames_;
  std::optional<InputError> error_;
};

std::string too_large(std::size_t bytes, std::size_t max_bytes) {
  return "is " + std::to_string(bytes) + " bytes, more than the " + std::to_string(max_bytes) +
         " bytes ETH reads from one file";
}

}  // namespace

std::string read_text_file(const std::filesystem::path& path, const std::string& component,
                           std::size_t max_bytes) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    throw InputError(component, path.string(), "",
                     errno == ENOENT ? "cannot read: no such file"
                                     : std::string("cannot open for reading: ") +
                                           std::strerror(errno));
  }
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    throw InputError(component, path.string(), "", std::string("cannot stat: ") +
                                                       std::strerror(errno));
  }
  if (!S_ISREG(st.st_mode)) {
    throw InputError(component, path.string(), "",
                     S_ISDIR(st.st_mode) ? "is a folder, expected a file"
                                         : "is not a regular file (a device, FIFO or socket)");
  }
  const auto size = static_cast<std::size_t>(st.st_size);
  if (size > max_bytes) throw InputError(component, path.string(), "", too_large(size, max_bytes));
  std::string text(size, '\0');
  std::size_t got = 0;
  while (got < size) {
    const ssize_t n = ::read(fd, text.data() + got, size - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      throw InputError(component, path.string(), "", std::string("cannot read: ") +
                                                         std::strerror(errno));
    }
    if (n == 0) break;  // shrank while we read it
    got += static_cast<std::size_t>(n);
  }
  text.resize(got);
  return text;
}

Json parse_json_text(const std::string& text, const std::string& source,
                     const std::string& component, const JsonLimits& limits) {
  if (text.size() > limits.max_bytes) {
    throw InputError(component, source, "", too_large(text.size(), limits.max_bytes));
  }
  scan_bytes(text, source, component);
  BoundedBuilder b(text, source, component, limits);
  const bool ok = Json::sax_parse(text, &b);
  if (b.error()) throw *b.error();
  if (!ok) throw InputError(component, source, "", "invalid JSON");
  return std::move(b.root());
}

Json read_json_file(const std::filesystem::path& path, const std::string& component,
                    const JsonLimits& limits) {
  return parse_json_text(read_text_file(path, component, limits.max_bytes), path.string(),
                         component, limits);
}

std::vector<std::filesystem::path> list_regular_files(const std::filesystem::path& dir,
                                                      const std::string& component) {
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) {
    throw InputError(component, dir.string(), "", "expected a folder");
  }
  std::vector<std::filesystem::path> out;
  std::filesystem::directory_iterator it(dir, ec), end;
  for (; !ec && it != end; it.increment(ec)) {
    std::error_code type_ec;
    if (it->is_regular_file(type_ec)) out.push_back(it->path());
  }
  if (ec) throw InputError(component, dir.string(), "", "cannot list the folder: " + ec.message());
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace eth
