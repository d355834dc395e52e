// The Python side of the runtime's argument structs (include/kvcanary/runtime/*.h): keyword tables
// for Config, PerturbConfig, Capacities, GroupSpec, ForwardBatch and ForwardHostInput, and the
// conversions that import their tensors into the C++ structs. Values are checked when they are
// set (strict scalars); tensors are imported when the runtime is called, into an ImportScope the
// caller keeps alive for as long as the runtime holds the views.
#pragma once

#include <pybind11/pybind11.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "dlpack_import.h"
#include "kvcanary/runtime/canary_manager.h"
#include "runtime_fields.h"

namespace kvcanary::python {

// kvcanary.runtime.GroupSpec: runtime::GroupSpec with its tensors still Python objects.
// bytes_per_token None = the (first) K layer's page bytes / page_size.
struct GroupSpecArgs {
  runtime::GroupKind kind = runtime::GroupKind::kFull;
  int64_t num_slots = 0;
  pybind11::object k_layer0 = pybind11::none();
  pybind11::object v_layer0 = pybind11::none();
  std::vector<pybind11::object> k_layers;  // instead of k_layer0/v_layer0: up to 1024 layers each
  std::vector<pybind11::object> v_layers;
  int64_t page_size = 1;
  std::optional<int64_t> bytes_per_token;
  pybind11::object full_to_swa = pybind11::none();
  int64_t host_slots = 0;
  runtime::PoolLayout layout = runtime::PoolLayout::kMha;
  std::vector<pybind11::object> indexer_layers;    // layout "nsa": the indexer's key buffer
  std::optional<int64_t> indexer_bytes_per_token;  // None = derived like bytes_per_token
  int64_t compress_ratio = 1;                      // > 1: a compressed pool (full group)
  pybind11::object full_to_compressed = pybind11::none();
};

// kvcanary.runtime.ForwardBatch: runtime::ForwardBatch with its tensors still Python objects.
struct ForwardBatchArgs {
  int64_t batch_size = 0;
  int64_t num_tokens = 0;
  pybind11::object req_pool_indices = pybind11::none();
  pybind11::object prefix_lens = pybind11::none();
  pybind11::object extend_seq_lens = pybind11::none();
  pybind11::object input_ids = pybind11::none();
  pybind11::object positions = pybind11::none();
  pybind11::object out_cache_loc = pybind11::none();
  pybind11::object req_to_token = pybind11::none();
  std::optional<int64_t> req_to_token_stride0;
  pybind11::object block_table = pybind11::none();
};

// The keywords of kvcanary.runtime.install(config, **kw): runtime::InstallArgs, its tensors and
// groups still Python objects, plus `log` (a callable(level, message) or None for stderr).
struct InstallKeywords {
  runtime::InstallArgs args;
  pybind11::object device = pybind11::none();
  pybind11::object stream = pybind11::none();
  pybind11::object req_to_token = pybind11::none();
  pybind11::object block_table = pybind11::none();
  std::vector<GroupSpecArgs> groups;
  pybind11::object log = pybind11::none();
};

const FieldTable<runtime::Config>& ConfigFields();
const FieldTable<runtime::PerturbConfig>& PerturbConfigFields();
const FieldTable<runtime::Capacities>& CapacitiesFields();
const FieldTable<GroupSpecArgs>& GroupSpecFields();
const FieldTable<ForwardBatchArgs>& ForwardBatchFields();
const FieldTable<runtime::ForwardHostInput>& ForwardHostInputFields();
const FieldTable<InstallKeywords>& InstallFields();

// "full" -> kFull, "swa" -> kSwa; else "kv-canary: <name> must be 'full' or 'swa', got ...".
runtime::GroupKind GroupKindArg(pybind11::handle value, std::string_view name);
// "mha", "mla" or "nsa" (any case); else "kv-canary: <name> must be 'mha', 'mla' or ...".
runtime::PoolLayout PoolLayoutArg(pybind11::handle value, std::string_view name);

// A layer tensor of any dtype and shape as uint8 [size(0), page bytes], a page being everything
// after the first dimension read as bytes. The trailing dimensions must be dense.
TensorView PagedLayerBytes(const TensorView& layer, std::string_view name);

// The install keywords as runtime::InstallArgs, every tensor imported into `scope` under its
// keyword ("groups[0].k_layer0"). The log sink is the caller's to set.
runtime::InstallArgs InstallArgsOf(const InstallKeywords& keywords, ImportScope& scope);

// One step's arguments: forwards[i] (ForwardBatch objects) and host[i] (ForwardHostInput objects),
// tensors imported into `scope`.
runtime::StepInput StepInputOf(pybind11::handle forwards, pybind11::handle host,
                               ImportScope& scope);

}  // namespace kvcanary::python
