// Safetensors-layout checkpoints: writing (hash, header, data, rename) and strict reading.
#include "train/checkpoint.h"

#include <bit>
#include <charconv>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/atomic_file.h"
#include "core/error.h"
#include "core/json_file.h"
#include "model/tied.h"
#include "train/state_backend.h"

namespace eth {

static_assert(std::endian::native == std::endian::little,
              "checkpoints store little-endian tensors verbatim");

namespace {

constexpr const char* kFormat = "eth-checkpoint";
// Version 2: qkv_w / qkv_b rows are head-interleaved ([q_h; k_h; v_h] per head h). Version 1
// files hold them as [all q; all k; all v]: same shapes, other meaning, so they are refused.
constexpr const char* kVersion = "2";
// Safetensors caps the header at 100 MB; anything larger is a damaged length field.
constexpr std::uint64_t kMaxHeaderBytes = 100'000'000;

[[noreturn]] void bad(const std::filesystem::path& path, const std::string& where,
                      const std::string& detail) {
  throw InputError("checkpoint", path.string(), where, detail);
}

// The three tensors stored per parameter tensor: the parameter and its two AdamW moments.
constexpr const char* kPartSuffix[] = {"", ".adam_m", ".adam_v"};
const float* part_buffer(const ModelState& s, int k) {
  return k == 0 ? s.params() : k == 1 ? s.adam_m() : s.adam_v();
}
float* part_buffer(ModelState& s, int k) {
  return k == 0 ? s.params() : k == 1 ? s.adam_m() : s.adam_v();
}

// Host copies of the three parts of a state whose kernel set's memory host code cannot touch
// (a device), downloaded when `fetch`; none (empty) when the buffers are host memory.
std::vector<std::vector<float>> host_copies(const ModelState& s, bool fetch) {
  std::vector<std::vector<float>> c;
  if (s.backend().host_visible()) return c;
  c.resize(3, std::vector<float>(static_cast<std::size_t>(s.numel())));
  for (int k = 0; k < 3 && fetch; ++k) {
    s.backend().download(c[static_cast<std::size_t>(k)].data(), part_buffer(s, k), s.numel());
  }
  return c;
}

// A tied model stores its embedding matrix once, as unit 0's wte: the head's lm_head_w (the
// same values and moments, model_state.h) is read from and written to that name.
std::string tensor_name(const ModelSpec& model, std::int64_t unit, const std::string& name,
                        const char* suffix) {
  if (unit != 0 && is_tied_tensor(model, unit, name)) return std::string("unit0.wte") + suffix;
  return "unit" + std::to_string(unit) + "." + name + suffix;
}

std::string hex64(std::uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016" PRIx64, v);
  return buf;
}

struct Entry {
  std::vector<std::int64_t> shape;
  std::uint64_t begin = 0, end = 0;  // byte offsets in the data section
  std::string checksum;
};

struct Header {
  std::uint64_t data_start = 0;  // 8 + header length
  std::map<std::string, Entry> tensors;
  CheckpointMeta meta;
};

Json parse_meta_json(const std::filesystem::path& path, const JsonCursor& md, const char* key) {
  const std::string text = md.at(key).as_string();
  try {
    return parse_json_text(text, path.string(), "checkpoint");  // bounded: depth, size
  } catch (const InputError& e) {
    bad(path, std::string("__metadata__.") + key, "not valid JSON: " + e.detail());
  }
}

Header read_header(const std::filesystem::path& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) bad(path, "", "no such checkpoint file");
  const std::uint64_t size = std::filesystem::file_size(path, ec);
  std::ifstream in(path, std::ios::binary);
  if (!in) bad(path, "", "cannot open for reading");
  if (size < 8) {
    bad(path, "",
        "truncated: " + std::to_string(size) +
            " bytes, expected at least the 8-byte header length");
  }
  std::uint64_t n = 0;
  in.read(reinterpret_cast<char*>(&n), 8);
  if (n > kMaxHeaderBytes || n > size - 8) {
    bad(path, "",
        "truncated or corrupt: the header length field says " + std::to_string(n) +
            " bytes but the file has " + std::to_string(size - 8) + " after it");
  }
  std::string text(n, '\0');
  in.read(text.data(), static_cast<std::streamsize>(n));
  if (!in) bad(path, "", "cannot read the header");
  Header h;
  h.data_start = 8 + n;
  const Json j = parse_json_text(text, path.string(), "checkpoint");
  const JsonCursor root(j, {"checkpoint", path.string(), ""});
  root.require_object();
  const JsonCursor md = root.at("__metadata__");
  md.require_object();
  if (md.at("format").as_string() != kFormat) md.at("format").fail("\"eth-checkpoint\"");
  const std::string version = md.at("version").as_string();
  if (version == "1") {
    md.at("version").fail_detail(
        "version 1 checkpoints store qkv_w/qkv_b as [all q; all k; all v]; this version lays "
        "them out per head ([q_h; k_h; v_h]), so the file cannot be resumed (train anew)");
  }
  if (version != kVersion) md.at("version").fail("\"2\"");
  const Json model = parse_meta_json(path, md, "model");
  h.meta.model =
      parse_model(JsonCursor(model, {"checkpoint", path.string(), "__metadata__.model"}));
  const std::string step = md.at("step").as_string();
  try {
    std::size_t used = 0;
    h.meta.step = std::stoll(step, &used);
    if (used != step.size() || h.meta.step < 0) throw std::invalid_argument(step);
  } catch (const std::exception&) {
    md.at("step").fail("a non-negative integer in a string");
  }
  h.meta.schedule = parse_meta_json(path, md, "schedule");
  h.meta.data = parse_meta_json(path, md, "data");
  h.meta.run = parse_meta_json(path, md, "run");
  const Json sums = parse_meta_json(path, md, "checksums");
  std::uint64_t data_end = 0;
  // Checksums by name, indexed once (looking each up in the JSON object would be quadratic).
  std::unordered_map<std::string, const Json*> sum_of;
  if (sums.is_object()) {
    for (auto it = sums.begin(); it != sums.end(); ++it) sum_of.emplace(it.key(), &it.value());
  }
  for (const auto& [key, t] : root.members()) {
    if (key == "__metadata__") continue;
    t.require_object();
    t.allow_only({"dtype", "shape", "data_offsets"});
    if (t.at("dtype").as_string() != "F32") t.at("dtype").fail("\"F32\" (ETH stores fp32)");
    Entry e;
    std::int64_t numel = 1;
    const JsonCursor shape = t.at("shape");
    if (shape.size() > 8) shape.fail("a shape of at most 8 dimensions");
    for (std::size_t i = 0; i < shape.size(); ++i) {
      e.shape.push_back(shape[i].as_int(0, INT64_MAX / 8));
      // No tensor holds more bytes than the file; checked before multiplying, so no overflow.
      if (e.shape.back() != 0 && numel > static_cast<std::int64_t>(size / 4) / e.shape.back()) {
        shape.fail_detail("describes a tensor larger than the file (" + std::to_string(size) +
                          " bytes)");
      }
      numel *= e.shape.back();
    }
    const JsonCursor off = t.at("data_offsets");
    if (off.size() != 2) off.fail("[begin, end]");
    e.begin = static_cast<std::uint64_t>(off[0].as_int(0));
    e.end = static_cast<std::uint64_t>(off[1].as_int(0));
    if (e.end < e.begin || e.end - e.begin != static_cast<std::uint64_t>(numel) * 4) {
      off.fail_detail("spans " + std::to_string(e.end - e.begin) + " bytes, but shape needs " +
                      std::to_string(numel * 4));
    }
    const auto sum = sum_of.find(key);
    if (sum == sum_of.end() || !sum->second->is_string()) {
      bad(path, "__metadata__.checksums", "no checksum for tensor \"" + key + "\"");
    }
    e.checksum = sum->second->get<std::string>();
    data_end = std::max(data_end, e.end);
    h.tensors.emplace(key, std::move(e));
  }
  const std::uint64_t have = size - h.data_start;
  if (have != data_end) {
    bad(path, "",
        std::string(have < data_end ? "truncated" : "trailing bytes") +
            ": the header's tensors need " + std::to_string(data_end) +
            " data bytes, the file has " + std::to_string(have));
  }
  return h;
}

}  // namespace

std::uint64_t checkpoint_hash(const void* data, std::size_t bytes) {
  // Four independent multiply-xor lanes over 8-byte words (fast enough to check gigabytes),
  // then the tail bytes and the length.
  constexpr std::uint64_t kMul = 0x9E3779B97F4A7C15ull;
  const auto* p = static_cast<const unsigned char*>(data);
  std::uint64_t lane[4] = {1, 2, 3, 4};
  std::size_t i = 0;
  for (; i + 32 <= bytes; i += 32) {
    for (int k = 0; k < 4; ++k) {
      std::uint64_t w;
      std::memcpy(&w, p + i + 8 * k, 8);
      lane[k] = (std::rotl(lane[k], 29) ^ w) * kMul;
    }
  }
  std::uint64_t h = bytes;
  for (std::uint64_t l : lane) h = (std::rotl(h, 31) ^ l) * kMul;
  for (; i < bytes; ++i) h = (h ^ p[i]) * kMul;
  return h ^ (h >> 32);
}

void write_checkpoint(const std::filesystem::path& path, const ModelState& state,
                      const CheckpointMeta& meta) {
  // A sharded state holds a part of the moments: the runtime gathers whole tensors first.
  ETH_CHECK(!state.sharded(), "write_checkpoint: a sharded state (gather it whole first)");
  struct Out {
    const float* data;
    std::int64_t numel;
  };
  std::vector<Out> order;
  Json header = Json::object();
  Json sums = Json::object();
  header["__metadata__"] = Json::object();
  std::uint64_t offset = 0;
  ETH_CHECK(state.layout().tp() == 1, "write_checkpoint: gather the tp shards first");
  const auto copies = host_copies(state, true);
  auto part = [&](int k) {
    return copies.empty() ? part_buffer(state, k) : copies[static_cast<std::size_t>(k)].data();
  };
  for (const UnitSlot& u : state.layout().units()) {
    for (const TensorSlot& t : u.tensors) {
      for (int k = 0; k < 3; ++k) {
        const float* data = part(k) + t.offset;
        const std::int64_t n = t.desc.numel();
        const std::string name = tensor_name(state.model(), u.unit, t.desc.name, kPartSuffix[k]);
        if (header.contains(name)) continue;  // a tied matrix's second copy
        const std::uint64_t bytes = static_cast<std::uint64_t>(n) * 4;
        header[name] = Json{
            {"dtype", "F32"}, {"shape", t.desc.shape}, {"data_offsets", {offset, offset + bytes}}};
        sums[name] = hex64(checkpoint_hash(data, bytes));
        order.push_back({data, n});
        offset += bytes;
      }
    }
  }
  header["__metadata__"] = Json{{"format", kFormat},
                                {"version", kVersion},
                                {"model", model_to_json(meta.model).dump()},
                                {"step", std::to_string(meta.step)},
                                {"schedule", meta.schedule->dump()},
                                {"data", meta.data->dump()},
                                {"run", meta.run->dump()},
                                {"checksums", sums.dump()}};
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // data starts 8-byte aligned
  const std::uint64_t n = text.size();

  // The checkpoint folder is created by design (eth train --checkpoint-dir).
  if (path.has_parent_path()) prepare_output_dir(path.parent_path(), "checkpoint");
  AtomicFile out(path, "checkpoint");
  out.write(&n, 8);
  out.write(text.data(), n);
  for (const Out& o : order) out.write(o.data, static_cast<std::size_t>(o.numel) * 4);
  out.commit();
}

CheckpointMeta read_checkpoint_meta(const std::filesystem::path& path) {
  return read_header(path).meta;
}

CheckpointMeta load_checkpoint(const std::filesystem::path& path, ModelState& state) {
  ETH_CHECK(!state.sharded(), "load_checkpoint: a sharded state (load a whole one, then shard)");
  Header h = read_header(path);
  if (h.meta.model.layers != state.model().layers || h.meta.model.hidden != state.model().hidden ||
      h.meta.model.heads != state.model().heads || h.meta.model.vocab != state.model().vocab ||
      h.meta.model.ffn != state.model().ffn || h.meta.model.seq_len != state.model().seq_len ||
      h.meta.model.tied_embeddings != state.model().tied_embeddings) {
    bad(path, "__metadata__.model",
        "the checkpoint's model " + model_to_json(h.meta.model).dump() +
            " differs from the one being trained " + model_to_json(state.model()).dump());
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) bad(path, "", "cannot open for reading");
  std::vector<float> whole;  // a sharded tensor is read whole (its checksum covers all of it)
  auto copies = host_copies(state, false);
  auto part = [&](int k) {
    return copies.empty() ? part_buffer(state, k) : copies[static_cast<std::size_t>(k)].data();
  };
  for (const UnitSlot& u : state.layout().units()) {
    for (const TensorSlot& t : u.tensors) {
      for (int k = 0; k < 3; ++k) {
        const std::string name = tensor_name(state.model(), u.unit, t.desc.name, kPartSuffix[k]);
        auto it = h.tensors.find(name);
        if (it == h.tensors.end()) bad(path, name, "missing tensor");
        const Entry& e = it->second;
        if (e.shape != t.full_shape()) bad(path, name + ".shape", "does not match the model");
        float* dst = part(k) + t.offset;
        float* read_to = dst;
        if (t.is_shard()) {
          whole.resize((e.end - e.begin) / 4);
          read_to = whole.data();
        }
        in.seekg(static_cast<std::streamoff>(h.data_start + e.begin));
        in.read(reinterpret_cast<char*>(read_to), static_cast<std::streamsize>(e.end - e.begin));
        if (!in) bad(path, name, "cannot read the tensor's bytes");
        if (hex64(checkpoint_hash(read_to, e.end - e.begin)) != e.checksum) {
          bad(path, name, "checksum mismatch: the file is corrupt");
        }
        if (t.is_shard()) {
          std::copy_n(whole.data() + t.rows.begin * t.row_size(), t.desc.numel(), dst);
        }
      }
    }
  }
  for (std::size_t k = 0; k < copies.size(); ++k) {
    state.backend().upload(part_buffer(state, static_cast<int>(k)), copies[k].data(),
                           state.numel());
  }
  // The file holds fp32 masters whatever precision wrote it: a bf16 state rounds them into its
  // compute copy here, so fp32 and bf16 runs resume each other's checkpoints.
  state.refresh_compute_copy();
  return h.meta;
}

std::filesystem::path checkpoint_path(const std::filesystem::path& dir, std::int64_t step) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "step_%08lld.safetensors", static_cast<long long>(step));
  return dir / buf;
}

std::optional<std::int64_t> checkpoint_step(const std::filesystem::path& file) {
  const std::string name = file.filename().string();
  const std::string_view prefix = "step_", suffix = ".safetensors";
  if (!name.starts_with(prefix) || !name.ends_with(suffix)) return std::nullopt;
  const std::string_view digits =
      std::string_view(name).substr(prefix.size(), name.size() - prefix.size() - suffix.size());
  std::int64_t step = 0;
  const auto [at, err] = std::from_chars(digits.data(), digits.data() + digits.size(), step);
  if (err != std::errc() || at != digits.data() + digits.size()) return std::nullopt;
  return step;
}

std::optional<std::filesystem::path> latest_checkpoint(const std::filesystem::path& dir) {
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) return std::nullopt;
  std::optional<std::filesystem::path> best;
  std::int64_t best_step = -1;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    // By the step's number, not the name: past 8 digits the zero padding no longer sorts them.
    const std::optional<std::int64_t> step = checkpoint_step(entry.path());
    if (step && *step > best_step) {
      best_step = *step;
      best = entry.path();
    }
  }
  return best;
}

}  // namespace eth
