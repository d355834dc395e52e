#include "runtime/group_sources.h"

#include <cstdint>
#include <string>

#include "kvcanary/error.h"

namespace kvcanary::runtime {
namespace {

std::string HalfName(const GroupSpec& spec, const char* half) {
  return std::string("group ") + GroupKindName(spec.kind) + " " + half + "_layers";
}

// The listed layers a fingerprint folds (Config::fingerprint_layers): every one, or the first
// (layer 0, SGLang's fingerprint).
std::vector<TensorView> FingerprintedLayers(const std::vector<TensorView>& listed,
                                            const Config& config) {
  if (config.fingerprint_layers == FingerprintLayers::kAll || listed.size() <= 1) return listed;
  return {listed.front()};
}

std::string Layout(const TensorView& t) {
  return std::string("dtype ") + DTypeName(t.dtype()) + ", shape " + t.ShapeString() +
         ", strides " + t.StridesString() + ", device " + t.device().ToString();
}

// One source reads every layer through layer 0's geometry: each must be laid out like it.
void CheckSameLayout(const std::vector<TensorView>& layers, const std::string& name) {
  const TensorView& first = layers.front();
  for (size_t i = 1; i < layers.size(); ++i) {
    const TensorView& layer = layers[i];
    if (Layout(layer) != Layout(first)) {
      ThrowError("kv-canary: ", name, "[", i, "] must be laid out like ", name, "[0] (",
                 Layout(first), "), got ", Layout(layer));
    }
  }
}

}  // namespace

std::vector<TensorView> ListedLayers(const TensorView& layer0, const std::vector<TensorView>& layers,
                                     const char* half, const GroupSpec& spec, const Config& config) {
  if (layers.empty()) return layer0.defined() ? std::vector<TensorView>{layer0} : layers;
  const std::string name = HalfName(spec, half);
  if (layer0.defined()) {
    ThrowError("kv-canary: ", name, " and ", half, "_layer0 are both given; pass one");
  }
  if (static_cast<int64_t>(layers.size()) > kMaxRealKvLayers) {
    ThrowError("kv-canary: ", name, " must hold at most ", kMaxRealKvLayers, " layers, got ",
               layers.size());
  }
  const size_t fingerprinted = FingerprintedLayers(layers, config).size();
  if (config.verify_backup && fingerprinted > 1) {
    ThrowError("kv-canary: verify_backup re-hashes one host layer; ", name, " has ", fingerprinted,
               " (give one layer, or turn verify_backup off)");
  }
  return layers;
}

namespace {

// The sources of the fingerprinted layers of `listed`, each row `bytes_per_token` wide per token:
// one per layer up to `max_sources`, beyond that one spanning them through an address table.
HalfSources BuildSources(const std::vector<TensorView>& listed, const std::string& name,
                         int64_t page_size, int64_t bytes_per_token, const Config& config,
                         const SourceTarget& target) {
  HalfSources out;
  const RealKvHashMode mode = config.real_data;
  if (mode == RealKvHashMode::kNone || listed.empty()) return out;
  if (bytes_per_token <= 0 || bytes_per_token % kRealKvBlockBytes != 0) return out;
  const int64_t read_bytes = mode == RealKvHashMode::kPartial ? kRealKvBlockBytes : bytes_per_token;
  out.layers = FingerprintedLayers(listed, config);
  for (const TensorView& layer : out.layers) {  // every layer checked, even when one source reads
    out.sources.push_back(MakeRealKvSource(layer, page_size, bytes_per_token, read_bytes));
  }
  if (out.layers.size() <= static_cast<size_t>(target.max_sources)) return out;
  CheckSameLayout(out.layers, name);
  const auto count = static_cast<int64_t>(out.layers.size());
  std::vector<int64_t> addresses;
  for (const TensorView& layer : out.layers) {
    addresses.push_back(static_cast<int64_t>(reinterpret_cast<uintptr_t>(layer.data())));
  }
  out.layer_table = DeviceBuffer(target.device, 8 * count);
  CopyBytesAsync(out.layer_table.data(), addresses.data(), 8 * count, target.device, target.stream);
  SynchronizeStream(target.device, target.stream);  // `addresses` is freed on return
  out.sources.resize(1);
  out.sources[0].layer_addresses = out.layer_table.View(DType::kInt64, {count});
  return out;
}

}  // namespace

HalfSources BuildHalfSources(const std::vector<TensorView>& listed, const char* half,
                             const GroupSpec& spec, const Config& config,
                             const SourceTarget& target) {
  return BuildSources(listed, HalfName(spec, half), spec.page_size, spec.bytes_per_token, config,
                      target);
}

HalfSources BuildIndexerSources(const GroupSpec& spec, const Config& config,
                                const SourceTarget& target) {
  return BuildSources(spec.indexer_layers, HalfName(spec, "indexer"), spec.page_size,
                      spec.indexer_bytes_per_token, config, target);
}

}  // namespace kvcanary::runtime
