#include "runtime/group_sources.h"

#include <cstdint>
#include <string>

#include "kvcanary/error.h"

namespace kvcanary::runtime {
namespace {

std::string HalfName(const GroupSpec& spec, const char* half) {
  return std::string("group ") + GroupKindName(spec.kind) + " " + half + "_layers";
}

// The listed layers a fingerprint folds (Config::fingerprint_layers): all of them, or layer 0 of a
// list longer than kMaxRealKvSources (a shorter list folds every layer, as before the option).
std::vector<TensorView> FingerprintedLayers(const std::vector<TensorView>& listed,
                                            const Config& config) {
  if (config.fingerprint_layers == FingerprintLayers::kAll ||
      listed.size() <= static_cast<size_t>(kMaxRealKvSources)) {
    return listed;
  }
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

HalfSources BuildHalfSources(const std::vector<TensorView>& listed, const char* half,
                             const GroupSpec& spec, const Config& config, Device device,
                             StreamHandle stream) {
  HalfSources out;
  const RealKvHashMode mode = config.real_data;
  if (mode == RealKvHashMode::kNone || listed.empty()) return out;
  if (spec.bytes_per_token <= 0 || spec.bytes_per_token % kRealKvBlockBytes != 0) return out;
  const int64_t read_bytes =
      mode == RealKvHashMode::kPartial ? kRealKvBlockBytes : spec.bytes_per_token;
  out.layers = FingerprintedLayers(listed, config);
  for (const TensorView& layer : out.layers) {  // every layer checked, even when one source reads
    out.sources.push_back(
        MakeRealKvSource(layer, spec.page_size, spec.bytes_per_token, read_bytes));
  }
  if (out.layers.size() <= static_cast<size_t>(kMaxRealKvSources)) return out;
  CheckSameLayout(out.layers, HalfName(spec, half));
  const auto count = static_cast<int64_t>(out.layers.size());
  std::vector<int64_t> addresses;
  for (const TensorView& layer : out.layers) {
    addresses.push_back(static_cast<int64_t>(reinterpret_cast<uintptr_t>(layer.data())));
  }
  out.layer_table = DeviceBuffer(device, 8 * count);
  CopyBytesAsync(out.layer_table.data(), addresses.data(), 8 * count, device, stream);
  SynchronizeStream(device, stream);  // `addresses` is freed on return
  out.sources.resize(1);
  out.sources[0].layer_addresses = out.layer_table.View(DType::kInt64, {count});
  return out;
}

}  // namespace kvcanary::runtime
