#include "runtime_args.h"

#include <string>

#include "kvcanary/checked.h"

namespace py = pybind11;

namespace kvcanary::python {
namespace {

using runtime::Capacities;
using runtime::Config;
using runtime::ForwardHostInput;
using runtime::GroupKind;
using runtime::PerturbConfig;

// A field of a nested struct (InstallKeywords::args) through the nested struct's own row.
template <typename Outer, typename Inner>
Field<Outer> Nested(Inner Outer::*member, Field<Inner> inner) {
  return {inner.name, [member, get = inner.get](const Outer& o) { return get(o.*member); },
          [member, set = inner.set](Outer& o, py::handle v) { set(o.*member, v); }};
}

Field<InstallKeywords> ArgsField(Field<runtime::InstallArgs> inner) {
  return Nested(&InstallKeywords::args, std::move(inner));
}

// A keyword taken as any Python object, checked when the runtime is installed.
template <typename T>
Field<T> ObjectField(const char* name, py::object T::*member) {
  return {name, [member](const T& t) { return t.*member; },
          [member](T& t, py::handle v) { t.*member = py::reinterpret_borrow<py::object>(v); }};
}

// A per-step probability, named by its keyword (PerturbConfig::Validate names the variable).
Field<PerturbConfig> ProbabilityField(const char* name, double PerturbConfig::*member) {
  Field<PerturbConfig> field = NumberField(name, member);
  field.set = [member, name](PerturbConfig& p, py::handle v) {
    const double probability = NumberArg(v, name);
    if (!(probability >= 0 && probability <= 1)) {
      ThrowError("kv-canary: ", name, " must be in [0, 1], got ", probability);
    }
    p.*member = probability;
  };
  return field;
}

std::string Lowercase(std::string text) {
  for (char& c : text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return text;
}

// Index `i` of `name`: "groups[2]".
std::string Item(std::string_view name, size_t i) {
  return std::string(name) + "[" + std::to_string(i) + "]";
}

}  // namespace

GroupKind GroupKindArg(py::handle value, std::string_view name) {
  const std::string text = StrArg(value, name);
  if (Lowercase(text) == "full") return GroupKind::kFull;
  if (Lowercase(text) == "swa") return GroupKind::kSwa;
  ThrowError("kv-canary: ", name, " must be 'full' or 'swa', got '", text, "'");
}

const FieldTable<Config>& ConfigFields() {
  static const FieldTable<Config> table = {
      {"mode", [](const Config& c) { return py::str(runtime::ModeName(c.mode)); },
       [](Config& c, py::handle v) { c.mode = runtime::ParseMode(StrArg(v, "mode")); }},
      {"real_data", [](const Config& c) { return py::str(runtime::RealDataName(c.real_data)); },
       [](Config& c, py::handle v) {
         c.real_data = runtime::ParseRealData(StrArg(v, "real_data"));
       }},
      Int64Field("sweep_interval", &Config::sweep_interval),
      Int64Field("ring_capacity", &Config::ring_capacity),
      Int64Field("stats_print_every_n_steps", &Config::stats_print_every_n_steps),
      BoolField("enable_write_input_assert", &Config::enable_write_input_assert),
      BoolField("enable_verify_token_assert", &Config::enable_verify_token_assert),
      BoolField("enable_token_oracle", &Config::enable_token_oracle),
      BoolField("enable_mha_v", &Config::enable_mha_v),
      Int64Field("swa_divergence_stats_interval", &Config::swa_divergence_stats_interval),
      BoolField("verify_backup", &Config::verify_backup),
      BoolField("report_untouched_rows", &Config::report_untouched_rows),
      BoolField("allreduce_violation_signal", &Config::allreduce_violation_signal),
      StrField("incident_file", &Config::incident_file),
      BoolField("fused_verify", &Config::fused_verify),
  };
  return table;
}

const FieldTable<PerturbConfig>& PerturbConfigFields() {
  static const FieldTable<PerturbConfig> table = {
      ProbabilityField("req_to_token_prob", &PerturbConfig::req_to_token_prob),
      ProbabilityField("real_kv_used_prob", &PerturbConfig::real_kv_used_prob),
      ProbabilityField("real_kv_unused_cache_prob", &PerturbConfig::real_kv_unused_cache_prob),
      ProbabilityField("real_kv_post_forward_prob", &PerturbConfig::real_kv_post_forward_prob),
      ProbabilityField("next_token_swap_prob", &PerturbConfig::next_token_swap_prob),
      {"target_group",
       [](const PerturbConfig& p) -> py::object {
         if (!p.target_group) return py::none();
         return py::str(Lowercase(runtime::GroupKindName(*p.target_group)));
       },
       [](PerturbConfig& p, py::handle v) {
         p.target_group =
             v.is_none() ? std::nullopt : std::optional(GroupKindArg(v, "target_group"));
       }},
      Int64Field("warmup_steps", &PerturbConfig::warmup_steps),
      {"seed", [](const PerturbConfig& p) { return py::int_(p.seed); },
       [](PerturbConfig& p, py::handle v) { p.seed = U64Arg(v, "seed"); }},
  };
  return table;
}

const FieldTable<Capacities>& CapacitiesFields() {
  static const FieldTable<Capacities> table = {
      Int64Field("verify_capacity", &Capacities::verify_capacity),
      Int64Field("write_req_capacity", &Capacities::write_req_capacity),
      Int64Field("write_entry_capacity", &Capacities::write_entry_capacity),
  };
  return table;
}

const FieldTable<GroupSpecArgs>& GroupSpecFields() {
  static const FieldTable<GroupSpecArgs> table = {
      {"kind",
       [](const GroupSpecArgs& g) { return py::str(Lowercase(runtime::GroupKindName(g.kind))); },
       [](GroupSpecArgs& g, py::handle v) { g.kind = GroupKindArg(v, "kind"); }},
      Int64Field("num_slots", &GroupSpecArgs::num_slots),
      TensorField("k_layer0", &GroupSpecArgs::k_layer0),
      TensorField("v_layer0", &GroupSpecArgs::v_layer0),
      Int64Field("page_size", &GroupSpecArgs::page_size),
      OptionalInt64Field("bytes_per_token", &GroupSpecArgs::bytes_per_token),
      TensorField("full_to_swa", &GroupSpecArgs::full_to_swa),
      Int64Field("host_slots", &GroupSpecArgs::host_slots),
  };
  return table;
}

const FieldTable<ForwardBatchArgs>& ForwardBatchFields() {
  using B = ForwardBatchArgs;
  static const FieldTable<B> table = {
      Int64Field("batch_size", &B::batch_size),
      Int64Field("num_tokens", &B::num_tokens),
      TensorField("req_pool_indices", &B::req_pool_indices),
      TensorField("prefix_lens", &B::prefix_lens),
      TensorField("extend_seq_lens", &B::extend_seq_lens),
      TensorField("input_ids", &B::input_ids),
      TensorField("positions", &B::positions),
      TensorField("out_cache_loc", &B::out_cache_loc),
      TensorField("req_to_token", &B::req_to_token),
      OptionalInt64Field("req_to_token_stride0", &B::req_to_token_stride0),
  };
  return table;
}

const FieldTable<ForwardHostInput>& ForwardHostInputFields() {
  using H = ForwardHostInput;
  static const FieldTable<H> table = {
      Int64ListField("req_pool_indices", &H::req_pool_indices),
      Int64ListField("prefix_lens", &H::prefix_lens),
      Int64ListField("extend_seq_lens", &H::extend_seq_lens),
      Int64ListField("req_all_ids_flat", &H::req_all_ids_flat),
      Int64ListField("req_all_ids_lens", &H::req_all_ids_lens),
      Int64ListField("expected_input_tokens", &H::expected_input_tokens),
      Int64ListField("expected_input_positions", &H::expected_input_positions),
  };
  return table;
}

const FieldTable<InstallKeywords>& InstallFields() {
  using A = runtime::InstallArgs;
  using K = InstallKeywords;
  static const FieldTable<K> table = {
      ObjectField("device", &K::device),
      ObjectField("stream", &K::stream),
      TensorField("req_to_token", &K::req_to_token),
      {"groups", [](const K& k) { return py::cast(k.groups); },
       [](K& k, py::handle v) {
         if (!PyList_Check(v.ptr()) && !PyTuple_Check(v.ptr())) {
           ThrowTypeError("kv-canary: groups must be a list of GroupSpec, got ", TypeName(v));
         }
         std::vector<GroupSpecArgs> groups;
         const py::sequence items = py::reinterpret_borrow<py::sequence>(v);
         for (size_t i = 0; i < items.size(); ++i) {
           if (!py::isinstance<GroupSpecArgs>(items[i])) {
             ThrowTypeError("kv-canary: ", Item("groups", i), " must be a GroupSpec, got ",
                            TypeName(items[i]));
           }
           groups.push_back(items[i].cast<GroupSpecArgs>());
         }
         k.groups = std::move(groups);
       }},
      ArgsField(Int64Field("swa_window_size", &A::swa_window_size)),
      ArgsField(Int64Field("pool_slot_count", &A::pool_slot_count)),
      ArgsField(Int64Field("cuda_graph_max_bs", &A::cuda_graph_max_bs)),
      ArgsField(Int64Field("speculative_num_draft_tokens", &A::speculative_num_draft_tokens)),
      ArgsField(Int64Field("max_prefill_tokens", &A::max_prefill_tokens)),
      ArgsField(OptionalInt64Field("chunked_prefill_size", &A::chunked_prefill_size)),
      ArgsField(BoolField("draft_worker", &A::draft_worker)),
      ArgsField(Int64Field("kv_token_id_vs_position_offset", &A::kv_token_id_vs_position_offset)),
      ArgsField(BoolField("graph_capture", &A::graph_capture)),
      ArgsField(BoolField("piecewise_capture", &A::piecewise_capture)),
      ArgsField(Field<A>{
          "num_inner_forwards", [](const A& a) { return py::int_(a.num_inner_forwards); },
          [](A& a, py::handle v) { a.num_inner_forwards = Int32Arg(v, "num_inner_forwards"); }}),
      ArgsField(Field<A>{"capacities", [](const A& a) { return py::cast(a.capacities); },
                         [](A& a, py::handle v) {
                           if (!v.is_none() && !py::isinstance<Capacities>(v)) {
                             ThrowTypeError(
                                 "kv-canary: capacities must be a Capacities or None, got ",
                                 TypeName(v));
                           }
                           a.capacities =
                               v.is_none() ? std::nullopt : std::optional(v.cast<Capacities>());
                         }}),
      ArgsField(Field<A>{"perturb", [](const A& a) { return py::cast(a.perturb); },
                         [](A& a, py::handle v) {
                           if (!py::isinstance<PerturbConfig>(v)) {
                             ThrowTypeError("kv-canary: perturb must be a PerturbConfig, got ",
                                            TypeName(v));
                           }
                           a.perturb = v.cast<PerturbConfig>();
                         }}),
      ObjectField("log", &K::log),
  };
  return table;
}

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

// A layer's tokens per page given, its bytes per token derived from its page bytes.
int64_t DerivedBytesPerToken(const TensorView& k_bytes, int64_t page_size,
                             const std::string& name) {
  if (!k_bytes.defined()) return 0;
  if (page_size <= 0)
    ThrowError("kv-canary: ", name, ".page_size must be positive, got ", page_size);
  const int64_t page_bytes = k_bytes.size(1);
  if (page_bytes % page_size != 0) {
    ThrowError("kv-canary: ", name, ".bytes_per_token must be given when the page bytes of ", name,
               ".k_layer0 (", page_bytes, ") are not a multiple of page_size (", page_size,
               "), got None");
  }
  return page_bytes / page_size;
}

runtime::GroupSpec GroupSpecOf(const GroupSpecArgs& g, ImportScope& scope,
                               const std::string& name) {
  runtime::GroupSpec spec;
  spec.kind = g.kind;
  spec.num_slots = g.num_slots;
  spec.page_size = g.page_size;
  spec.host_slots = g.host_slots;
  const auto layer = [&](const py::object& tensor, const char* field) {
    const std::string field_name = name + "." + field;
    return PagedLayerBytes(scope.Import(tensor, field_name), field_name);
  };
  spec.k_layer0 = layer(g.k_layer0, "k_layer0");
  spec.v_layer0 = layer(g.v_layer0, "v_layer0");
  spec.full_to_swa = scope.Import(g.full_to_swa, name + ".full_to_swa");
  spec.bytes_per_token = g.bytes_per_token.has_value()
                             ? *g.bytes_per_token
                             : DerivedBytesPerToken(spec.k_layer0, g.page_size, name);
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
      {&F::req_to_token, &B::req_to_token, "req_to_token"}};
  for (const TensorRow& row : kTensors) {
    batch.*row.view = scope.Import(b.*row.object, name + "." + row.field);
  }
  batch.req_to_token_stride0 = b.req_to_token_stride0;
  return batch;
}

// `value` as a list of `Type` objects named `name`.
template <typename Type>
std::vector<Type> ListOf(py::handle value, const char* name, const char* type_name) {
  if (!PyList_Check(value.ptr()) && !PyTuple_Check(value.ptr())) {
    ThrowTypeError("kv-canary: ", name, " must be a list of ", type_name, ", got ",
                   TypeName(value));
  }
  std::vector<Type> out;
  const py::sequence items = py::reinterpret_borrow<py::sequence>(value);
  for (size_t i = 0; i < items.size(); ++i) {
    if (!py::isinstance<Type>(items[i])) {
      ThrowTypeError("kv-canary: ", Item(name, i), " must be a ", type_name, ", got ",
                     TypeName(items[i]));
    }
    out.push_back(items[i].cast<Type>());
  }
  return out;
}

}  // namespace

runtime::InstallArgs InstallArgsOf(const InstallKeywords& keywords, ImportScope& scope) {
  runtime::InstallArgs args = keywords.args;
  args.req_to_token = scope.Import(keywords.req_to_token, "req_to_token");
  args.device = DeviceArg(keywords.device, args.req_to_token);
  args.stream = keywords.stream.is_none()
                    ? nullptr
                    : reinterpret_cast<StreamHandle>(StreamArg(keywords.stream));
  args.groups.clear();
  for (size_t i = 0; i < keywords.groups.size(); ++i) {
    args.groups.push_back(GroupSpecOf(keywords.groups[i], scope, Item("groups", i)));
  }
  return args;
}

runtime::StepInput StepInputOf(py::handle forwards, py::handle host, ImportScope& scope) {
  const auto batches = ListOf<ForwardBatchArgs>(forwards, "forwards", "ForwardBatch");
  runtime::StepInput input;
  input.host = ListOf<runtime::ForwardHostInput>(host, "host", "ForwardHostInput");
  if (batches.size() != input.host.size()) {
    ThrowError("kv-canary: host must hold one ForwardHostInput per ForwardBatch (", batches.size(),
               "), got ", input.host.size());
  }
  for (size_t i = 0; i < batches.size(); ++i) {
    input.forwards.push_back(ForwardBatchOf(batches[i], scope, Item("forwards", i)));
  }
  return input;
}

}  // namespace kvcanary::python
