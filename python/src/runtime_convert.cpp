// The conversions of runtime_args.h: the keyword holders' tensors imported into the C++ structs.
#include <pybind11/stl.h>

#include <string>

#include "kvcanary/checked.h"
#include "runtime_args.h"

namespace py = pybind11;

namespace kvcanary::python {

TensorView PagedLayerBytes(const TensorView& layer, std::string_view name) {
  if (!layer.defined()) return layer;
  if (layer.ndim() < 2) {
    ThrowError("kv-canary: ", name, " must have at least 2 dims (pages, then a page), got shape ",
               layer.ShapeString());
  }
  // The page's dimensions must be row-major dense, so the page is one run of bytes.
  int64_t dense = 1;
  for (int d = layer.ndim() - 1; d >= 1; --d) {
    if (layer.size(d) != 1 && layer.stride(d) != dense) {
      ThrowError("kv-canary: ", name, " must have dense dims after the first (a page is one run ",
                 "of bytes), got shape ", layer.ShapeString(), " and strides ",
                 layer.StridesString());
    }
    dense = CheckedMul(std::string(name) + " page elements", dense, layer.size(d));
  }
  const int64_t item = ItemSize(layer.dtype());
  const int64_t page_bytes = CheckedMul(std::string(name) + " page bytes", dense, item);
  const int64_t row_stride = layer.size(0) == 1 ? page_bytes : layer.stride(0) * item;
  return TensorView(layer.data(), DType::kUInt8, layer.device(), {layer.size(0), page_bytes},
                    {row_stride, 1}, layer.writable());
}

namespace {

// None: the device of `reference` (CPU when absent); else "cpu", "cuda", "cuda:N" or an object
// whose str() is one (torch.device). "cuda" without an index takes the reference's index.
Device DeviceArg(py::handle device, const TensorView& reference) {
  if (device.is_none()) return reference.defined() ? reference.device() : Device::CPU();
  if (!PyUnicode_Check(device.ptr()) && !py::hasattr(device, "type")) {
    ThrowTypeError("kv-canary: device must be a str, a torch.device or None, got ",
                   TypeName(device));
  }
  const std::string text = py::str(device);
  if (text == "cpu") return Device::CPU();
  if (text == "cuda") {
    const bool cuda_reference = reference.defined() && reference.device().type == DeviceType::kCUDA;
    return Device::CUDA(cuda_reference ? reference.device().index : 0);
  }
  const std::string prefix = "cuda:";
  if (text.rfind(prefix, 0) == 0 && text.size() > prefix.size() &&
      text.find_first_not_of("0123456789", prefix.size()) == std::string::npos &&
      text.size() - prefix.size() < 6) {
    return Device::CUDA(std::stoi(text.substr(prefix.size())));
  }
  ThrowError("kv-canary: device must be 'cpu', 'cuda' or 'cuda:<index>', got '", text, "'");
}

// A layer's tokens per page given, its bytes per token derived from its page bytes. `field` and
// `layer` name the field a caller should give instead and the layer it was derived from.
int64_t DerivedBytesPerToken(const TensorView& k_bytes, int64_t page_size, const std::string& name,
                             const char* field = "bytes_per_token",
                             const char* layer = "first K layer") {
  if (!k_bytes.defined()) return 0;
  if (page_size <= 0) {
    ThrowError("kv-canary: ", name, ".page_size must be positive, got ", page_size);
  }
  const int64_t page_bytes = k_bytes.size(1);
  if (page_bytes % page_size != 0) {
    ThrowError("kv-canary: ", name, ".", field, " must be given when the page bytes of its ", layer,
               " (", page_bytes, ") are not a multiple of page_size (", page_size, "), got None");
  }
  return page_bytes / page_size;
}

// indexer_bytes_per_token as given, else derived from the first indexer layer (0 without one).
int64_t IndexerBytesPerToken(const GroupSpecArgs& g, const runtime::GroupSpec& spec,
                             const std::string& name) {
  if (g.indexer_bytes_per_token.has_value()) return *g.indexer_bytes_per_token;
  if (spec.indexer_layers.empty()) return 0;
  return DerivedBytesPerToken(spec.indexer_layers.front(), g.page_size, name,
                              "indexer_bytes_per_token", "first indexer layer");
}

runtime::GroupSpec GroupSpecOf(const GroupSpecArgs& g, ImportScope& scope,
                               const std::string& name) {
  runtime::GroupSpec spec;
  spec.kind = g.kind;
  spec.num_slots = g.num_slots;
  spec.page_size = g.page_size;
  spec.host_slots = g.host_slots;
  const auto layer = [&](const py::object& tensor, const std::string& field) {
    const std::string field_name = name + "." + field;
    return PagedLayerBytes(scope.Import(tensor, field_name), field_name);
  };
  spec.k_layer0 = layer(g.k_layer0, "k_layer0");
  spec.v_layer0 = layer(g.v_layer0, "v_layer0");
  for (size_t i = 0; i < g.k_layers.size(); ++i) {
    spec.k_layers.push_back(layer(g.k_layers[i], ItemName("k_layers", i)));
  }
  for (size_t i = 0; i < g.v_layers.size(); ++i) {
    spec.v_layers.push_back(layer(g.v_layers[i], ItemName("v_layers", i)));
  }
  spec.full_to_swa = scope.Import(g.full_to_swa, name + ".full_to_swa");
  spec.compress_ratio = g.compress_ratio;
  spec.full_to_compressed = scope.Import(g.full_to_compressed, name + ".full_to_compressed");
  spec.layout = g.layout;
  for (size_t i = 0; i < g.indexer_layers.size(); ++i) {
    spec.indexer_layers.push_back(layer(g.indexer_layers[i], ItemName("indexer_layers", i)));
  }
  spec.indexer_bytes_per_token = IndexerBytesPerToken(g, spec, name);
  const TensorView& first_k =
      spec.k_layer0.defined() || spec.k_layers.empty() ? spec.k_layer0 : spec.k_layers.front();
  spec.bytes_per_token = g.bytes_per_token.has_value()
                             ? *g.bytes_per_token
                             : DerivedBytesPerToken(first_k, g.page_size, name);
  return spec;
}

runtime::ForwardBatch ForwardBatchOf(const ForwardBatchArgs& b, ImportScope& scope,
                                     const std::string& name) {
  runtime::ForwardBatch batch;
  batch.batch_size = b.batch_size;
  batch.num_tokens = b.num_tokens;
  using F = runtime::ForwardBatch;
  using B = ForwardBatchArgs;
  struct TensorRow {
    TensorView F::*view;
    py::object B::*object;
    const char* field;
  };
  static const TensorRow kTensors[] = {
      {&F::req_pool_indices, &B::req_pool_indices, "req_pool_indices"},
      {&F::prefix_lens, &B::prefix_lens, "prefix_lens"},
      {&F::extend_seq_lens, &B::extend_seq_lens, "extend_seq_lens"},
      {&F::input_ids, &B::input_ids, "input_ids"},
      {&F::positions, &B::positions, "positions"},
      {&F::out_cache_loc, &B::out_cache_loc, "out_cache_loc"},
      {&F::req_to_token, &B::req_to_token, "req_to_token"},
      {&F::block_table, &B::block_table, "block_table"}};
  for (const TensorRow& row : kTensors) {
    batch.*row.view = scope.Import(b.*row.object, name + "." + row.field);
  }
  batch.req_to_token_stride0 = b.req_to_token_stride0;
  return batch;
}

}  // namespace

runtime::InstallArgs InstallArgsOf(const InstallKeywords& keywords, ImportScope& scope) {
  runtime::InstallArgs args = keywords.args;
  args.req_to_token = scope.Import(keywords.req_to_token, "req_to_token");
  args.block_table = scope.Import(keywords.block_table, "block_table");
  args.device = DeviceArg(keywords.device,
                          args.req_to_token.defined() ? args.req_to_token : args.block_table);
  args.stream = keywords.stream.is_none()
                    ? nullptr
                    : reinterpret_cast<StreamHandle>(StreamArg(keywords.stream));
  args.groups.clear();
  for (size_t i = 0; i < keywords.groups.size(); ++i) {
    args.groups.push_back(GroupSpecOf(keywords.groups[i], scope, ItemName("groups", i)));
  }
  return args;
}

runtime::StepInput StepInputOf(py::handle forwards, py::handle host, ImportScope& scope) {
  const auto batches = ObjectListArg<ForwardBatchArgs>(forwards, "forwards", "ForwardBatch");
  runtime::StepInput input;
  input.host = ObjectListArg<runtime::ForwardHostInput>(host, "host", "ForwardHostInput");
  if (batches.size() != input.host.size()) {
    ThrowError("kv-canary: host must hold one ForwardHostInput per ForwardBatch (", batches.size(),
               "), got ", input.host.size());
  }
  for (size_t i = 0; i < batches.size(); ++i) {
    input.forwards.push_back(ForwardBatchOf(batches[i], scope, ItemName("forwards", i)));
  }
  return input;
}

}  // namespace kvcanary::python
