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

}  // namespace

GroupKind GroupKindArg(py::handle value, std::string_view name) {
  const std::string text = StrArg(value, name);
  if (Lowercase(text) == "full") return GroupKind::kFull;
  if (Lowercase(text) == "swa") return GroupKind::kSwa;
  ThrowError("kv-canary: ", name, " must be 'full' or 'swa', got '", text, "'");
}

runtime::PoolLayout PoolLayoutArg(py::handle value, std::string_view name) {
  const std::string text = StrArg(value, name);
  for (const auto layout :
       {runtime::PoolLayout::kMha, runtime::PoolLayout::kMla, runtime::PoolLayout::kNsa}) {
    if (Lowercase(text) == runtime::PoolLayoutName(layout)) return layout;
  }
  ThrowError("kv-canary: ", name, " must be 'mha', 'mla' or 'nsa', got '", text, "'");
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
      {"fingerprint_layers",
       [](const Config& c) {
         return py::str(runtime::FingerprintLayersName(c.fingerprint_layers));
       },
       [](Config& c, py::handle v) {
         c.fingerprint_layers =
             runtime::ParseFingerprintLayers(StrArg(v, "fingerprint_layers"));
       }},
      Int64Field("verify_sample", &Config::verify_sample),
      {"verify_entries",
       [](const Config& c) { return py::str(runtime::VerifyEntriesName(c.verify_entries)); },
       [](Config& c, py::handle v) {
         c.verify_entries = runtime::ParseVerifyEntries(StrArg(v, "verify_entries"));
       }},
      {"on_violation",
       [](const Config& c) { return py::str(runtime::OnViolationName(c.on_violation)); },
       [](Config& c, py::handle v) {
         c.on_violation = runtime::ParseOnViolation(StrArg(v, "on_violation"));
       }},
      BoolField("jitter_enabled", &Config::jitter_enabled),
      NumberField("jitter_per_slot_fire_prob", &Config::jitter_per_slot_fire_prob),
      Int64Field("jitter_max_cycles", &Config::jitter_max_cycles),
      {"jitter_seed", [](const Config& c) { return py::int_(c.jitter_seed); },
       [](Config& c, py::handle v) { c.jitter_seed = U64Arg(v, "jitter_seed"); }},
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
      ProbabilityField("real_perturb_bytes_prob", &PerturbConfig::real_perturb_bytes_prob),
      BoolField("real_perturb_bytes_require_orphan",
                &PerturbConfig::real_perturb_bytes_require_orphan),
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
      TensorListField("k_layers", &GroupSpecArgs::k_layers, kMaxRealKvLayers),
      TensorListField("v_layers", &GroupSpecArgs::v_layers, kMaxRealKvLayers),
      Int64Field("page_size", &GroupSpecArgs::page_size),
      OptionalInt64Field("bytes_per_token", &GroupSpecArgs::bytes_per_token),
      TensorField("full_to_swa", &GroupSpecArgs::full_to_swa),
      Int64Field("host_slots", &GroupSpecArgs::host_slots),
      {"layout", [](const GroupSpecArgs& g) { return py::str(runtime::PoolLayoutName(g.layout)); },
       [](GroupSpecArgs& g, py::handle v) { g.layout = PoolLayoutArg(v, "layout"); }},
      TensorListField("indexer_layers", &GroupSpecArgs::indexer_layers, kMaxRealKvLayers),
      OptionalInt64Field("indexer_bytes_per_token", &GroupSpecArgs::indexer_bytes_per_token),
      Int64Field("compress_ratio", &GroupSpecArgs::compress_ratio),
      TensorField("full_to_compressed", &GroupSpecArgs::full_to_compressed),
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
      TensorField("block_table", &B::block_table),
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
      Int64ListField("block_ids", &H::block_ids),
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
      TensorField("block_table", &K::block_table),
      ArgsField(Int64Field("block_size", &A::block_size)),
      {"groups", [](const K& k) { return py::cast(k.groups); },
       [](K& k, py::handle v) {
         k.groups = ObjectListArg<GroupSpecArgs>(v, "groups", "GroupSpec");
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

}  // namespace kvcanary::python
