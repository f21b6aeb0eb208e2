// A model's safetensors weights: one file or the shards of an index. See safetensors.h.
#include <algorithm>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/json_file.h"
#include "hf/safetensors.h"

namespace eth::hf {

namespace {
constexpr const char* kSingle = "model.safetensors";
constexpr const char* kIndex = "model.safetensors.index.json";
constexpr std::size_t kMaxShards = 100'000;
}  // namespace

SafetensorsModel::SafetensorsModel(const std::filesystem::path& dir) {
  std::error_code ec;
  const auto index = dir / kIndex;
  const auto single = dir / kSingle;
  if (std::filesystem::is_regular_file(index, ec)) {
    sharded_ = true;
    const Json j = read_json_file(index, "hf");
    const JsonCursor root(j, {"hf", index.string(), ""});
    root.require_object();
    root.allow_only({"metadata", "weight_map"});
    const JsonCursor map = root.at("weight_map");
    map.require_object();
    std::map<std::string, std::size_t> shard_of_file;
    std::map<std::string, std::string> file_of_tensor;
    for (const auto& [tensor, file] : map.members()) {
      const std::string f = file.as_string();
      // A shard is a file beside the index: no folders, no "..", nothing absolute.
      if (f.empty() || f.find('/') != std::string::npos || f.find('\\') != std::string::npos ||
          f == "." || f == "..") {
        file.fail("a shard file name in the index's folder");
      }
      if (!shard_of_file.count(f)) {
        if (shard_of_file.size() >= kMaxShards) file.fail_detail("too many shards");
        shard_of_file.emplace(f, shard_of_file.size());
      }
      file_of_tensor[tensor] = f;
    }
    if (file_of_tensor.empty()) map.fail("a weight_map naming at least one tensor");
    std::vector<std::string> by_number(shard_of_file.size());
    for (const auto& [f, i] : shard_of_file) by_number[i] = f;
    for (const std::string& f : by_number) {
      files_.push_back(dir / f);
      shards_.push_back(std::make_unique<SafetensorsFile>(dir / f));
    }
    for (std::size_t s = 0; s < shards_.size(); ++s) {
      for (const TensorInfo& t : shards_[s]->tensors()) {
        auto it = file_of_tensor.find(t.name);
        if (it == file_of_tensor.end() || it->second != by_number[s]) {
          throw InputError("hf", index.string(), json_path_join("weight_map", t.name),
                           "shard " + by_number[s] + " holds tensor \"" + t.name +
                               "\" but the index maps it " +
                               (it == file_of_tensor.end() ? std::string("nowhere")
                                                           : "to " + it->second));
        }
        where_[t.name] = {s, &t};
      }
    }
    for (const auto& [tensor, f] : file_of_tensor) {
      if (!where_.count(tensor)) {
        throw InputError("hf", index.string(), json_path_join("weight_map", tensor),
                         "names shard " + f + ", which does not hold the tensor");
      }
    }
    return;
  }
  if (!std::filesystem::is_regular_file(single, ec)) {
    throw InputError("hf", dir.string(), "",
                     std::string("no ") + kSingle + " or " + kIndex +
                         " in the folder (ETH reads safetensors weights, not pytorch_model.bin)");
  }
  files_.push_back(single);
  shards_.push_back(std::make_unique<SafetensorsFile>(single));
  for (const TensorInfo& t : shards_[0]->tensors()) where_[t.name] = {0, &t};
}

const TensorInfo* SafetensorsModel::find(const std::string& name) const {
  auto it = where_.find(name);
  return it == where_.end() ? nullptr : it->second.info;
}

std::vector<std::string> SafetensorsModel::names() const {
  std::vector<std::string> out;
  for (const auto& [n, w] : where_) out.push_back(n);
  return out;
}

void SafetensorsModel::read_f32(const std::string& name, float* out) const {
  const Where& w = where_.at(name);
  shards_[w.shard]->read_f32(*w.info, out);
}

const std::filesystem::path& SafetensorsModel::file_of(const std::string& name) const {
  return files_[where_.at(name).shard];
}

}  // namespace eth::hf
