// The _kvcanary.runtime submodule: the host runtime's classes and install, as one table like
// binding.cpp's. kvcanary/runtime.py re-exports them with the Python-only helpers.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <memory>
#include <string>

#include "dlpack_export.h"
#include "kvcanary/runtime/radix_view.h"
#include "kvcanary/runtime/violation_format.h"
#include "runtime_canary.h"
#include "runtime_fields.h"
#include "scalars.h"

namespace py = pybind11;

namespace kvcanary::python {
namespace {

using runtime::Capacities;
using runtime::Config;
using runtime::PerturbConfig;

void RegisterArgumentClasses(py::module_& m) {
  py::class_<Config> config(m, "Config",
                            "The runtime's switches; keywords are the C++ field names.");
  BindKeywordClass<Config>(config, &ConfigFields(), "Config",
                           [](const Config& c) { c.Validate(); });
  config.def_static(
      "from_env", [] { return Config::FromEnv(); },
      "Every KVCANARY_* variable of the process environment, as Config::FromEnv.");
  py::class_<PerturbConfig> perturb(m, "PerturbConfig", "Fault injection, testing only.");
  BindKeywordClass<PerturbConfig>(perturb, &PerturbConfigFields(), "PerturbConfig",
                                  [](const PerturbConfig& p) { p.Validate(); });
  perturb.def_static("from_env", [] { return PerturbConfig::FromEnv(); });
  py::class_<Capacities> capacities(m, "Capacities", "Fixed launch capacities (capacities.h).");
  BindKeywordClass<Capacities>(capacities, &CapacitiesFields(), "Capacities");
  py::class_<GroupSpecArgs> group(m, "GroupSpec", "One buffer group of the KV pool.");
  BindKeywordClass<GroupSpecArgs>(group, &GroupSpecFields(), "GroupSpec");
  py::class_<ForwardBatchArgs> batch(m, "ForwardBatch", "One forward's device tensors.");
  BindKeywordClass<ForwardBatchArgs>(batch, &ForwardBatchFields(), "ForwardBatch");
  py::class_<runtime::ForwardHostInput> host(m, "ForwardHostInput",
                                             "One forward as the host sees it.");
  BindKeywordClass<runtime::ForwardHostInput>(host, &ForwardHostInputFields(), "ForwardHostInput");
}

void RegisterViolation(py::module_& m) {
  py::class_<Violation> violation(m, "Violation", "One reported violation row and its step.");
  const std::pair<const char*, int64_t ViolationRow::*> fields[] = {
      {"kernel_kind", &ViolationRow::kernel_kind},
      {"slot_idx", &ViolationRow::slot_idx},
      {"position", &ViolationRow::position},
      {"stored_token", &ViolationRow::stored_token},
      {"expected_token", &ViolationRow::expected_token},
      {"stored_chain_hash", &ViolationRow::stored_chain_hash},
      {"expected_aux", &ViolationRow::expected_aux},
      {"fail_reason_bits", &ViolationRow::fail_reason_bits}};
  for (const auto& [name, member] : fields) {
    violation.def_property_readonly(
        name, [member = member](const Violation& v) { return v.row.*member; });
  }
  violation.def_readonly("step", &Violation::step)
      .def_property_readonly(
          "launch_tag",
          [](const Violation& v) { return runtime::LaunchTagLabel(v.row.kernel_kind); })
      .def_property_readonly(
          "fail_reasons",
          [](const Violation& v) { return runtime::FailReasonLabels(v.row.fail_reason_bits, ","); })
      .def_property_readonly(
          "first_line", [](const Violation& v) { return runtime::FormatViolationFirstLine(v.row); })
      .def("__repr__", [](const Violation& v) {
        return "Violation(launch_tag=" + runtime::LaunchTagLabel(v.row.kernel_kind) +
               ", slot_idx=" + std::to_string(v.row.slot_idx) +
               ", position=" + std::to_string(v.row.position) +
               ", fail_reasons=" + runtime::FailReasonLabels(v.row.fail_reason_bits, ",") +
               ", step=" + std::to_string(v.step) + ")";
      });
}

void RegisterPerturbationEvent(py::module_& m) {
  using E = runtime::PerturbationEvent;
  py::class_<E>(m, "PerturbationEvent", "One fired perturbation (testing only).")
      .def_readonly("kind", &E::kind)
      .def_readonly("step", &E::step)
      .def_readonly("slot", &E::slot)
      .def_readonly("row", &E::row)
      .def_readonly("position", &E::position)
      .def_readonly("original", &E::original)
      .def_readonly("replacement", &E::replacement)
      .def_readonly("layer", &E::layer)
      .def_readonly("byte", &E::byte)
      .def("__repr__", [](const E& e) {
        return "PerturbationEvent(kind=" + e.kind + ", step=" + std::to_string(e.step) +
               ", slot=" + std::to_string(e.slot) + ", row=" + std::to_string(e.row) +
               ", position=" + std::to_string(e.position) + ")";
      });
}

void RegisterAffectedRequest(py::module_& m) {
  using A = runtime::AffectedRequest;
  py::class_<A>(m, "AffectedRequest",
                "A request a reported violation touched (on_violation quarantine).")
      .def_readonly("req_pool_idx", &A::req_pool_idx)
      .def_readonly("step", &A::step)
      .def_readonly("fail_reason_bits", &A::fail_reason_bits)
      .def_readonly("slots", &A::slots)
      .def_readonly("positions", &A::positions)
      .def_readonly("ring_overflow", &A::ring_overflow)
      .def("__repr__", [](const A& a) {
        return "AffectedRequest(req_pool_idx=" + std::to_string(a.req_pool_idx) +
               ", step=" + std::to_string(a.step) +
               ", fail_reasons=" + runtime::FailReasonLabels(a.fail_reason_bits, ",") +
               ", slots=" + std::to_string(a.slots.size()) + ")";
      });
}

const char* StoreLoadStatusName(runtime::StoreLoadStatus status) {
  switch (status) {
    case runtime::StoreLoadStatus::kLoaded:
      return "loaded";
    case runtime::StoreLoadStatus::kMiss:
      return "miss";
    case runtime::StoreLoadStatus::kCorrupt:
      return "corrupt";
  }
  return "unknown";
}

// The L3 tier's store and what a load from it found.
void RegisterPageStore(py::module_& m) {
  py::class_<PyFilePageStore>(m, "FilePageStore",
                              "One file <directory>/<key>.page per stored page (page_store.h).")
      .def(py::init([](py::handle directory) {
             if (!py::isinstance<py::str>(directory) && !py::hasattr(directory, "__fspath__")) {
               ThrowTypeError("kv-canary: directory must be a str or os.PathLike, got ",
                              TypeName(directory));
             }
             const py::object path = py::module_::import("os").attr("fspath")(directory);
             return std::make_unique<PyFilePageStore>(StrArg(path, "directory"));
           }),
           py::arg("directory"))
      .def_readonly("directory", &PyFilePageStore::directory)
      .def(
          "path_of",
          [](const PyFilePageStore& s, py::handle key) {
            const std::string text = StrArg(key, "key");
            runtime::CheckPageStoreKey(text);
            return s.store.PathOf(text);
          },
          py::arg("key"))
      .def("__repr__", [](const PyFilePageStore& s) {
        return "FilePageStore(directory='" + s.directory + "')";
      });
  using R = runtime::StoreLoadResult;
  py::class_<R>(m, "StoreLoadResult", "What load_from_store found: loaded, miss or corrupt.")
      .def_property_readonly("status", [](const R& r) { return StoreLoadStatusName(r.status); })
      .def_readonly("message", &R::message)
      .def("__repr__", [](const R& r) {
        return std::string("StoreLoadResult(status=") + StoreLoadStatusName(r.status) +
               (r.message.empty() ? "" : ", message=" + r.message) + ")";
      });
}

void RegisterCanaryManager(py::module_& m) {
  using M = PyCanaryManager;
  // Garbage-collected: a listener or radix view that refers back to the runtime is a cycle only
  // the collector can free, so it sees the Python objects the runtime holds.
  const auto gc_hooks = [](PyHeapTypeObject* heap_type) {
    PyTypeObject* type = &heap_type->ht_type;
    type->tp_flags |= Py_TPFLAGS_HAVE_GC;
    type->tp_traverse = [](PyObject* self, visitproc visit, void* arg) {
      Py_VISIT(Py_TYPE(self));  // instances of heap types own a reference to their type
      return py::cast<const M&>(py::handle(self)).Traverse(visit, arg);
    };
    type->tp_clear = [](PyObject* self) {
      py::cast<M&>(py::handle(self)).Clear();
      return 0;
    };
  };
  py::class_<M>(m, "CanaryManager", "The installed runtime (kvcanary.runtime.install).",
                py::custom_type_setup(gc_hooks))
      .def("mark_init_finished", &M::MarkInitFinished)
      .def("begin_step", &M::BeginStep, py::arg("forwards"), py::arg("host"))
      .def("pre_forward", &M::PreForward, py::arg("inner") = 0)
      .def("post_forward", &M::PostForward, py::arg("inner") = 0)
      .def("replayed_forward", &M::ReplayedForward, py::arg("inner") = 0)
      .def("end_step", &M::EndStep)
      .def("abandon_step", &M::AbandonStep)
      .def("on_violation", &M::OnViolation, py::arg("callback"))
      .def("on_perturbation", &M::OnPerturbation, py::arg("callback"))
      .def("perturb_next_tokens", &M::PerturbNextTokens, py::arg("sampled"))
      .def("take_affected_requests", &M::TakeAffectedRequests)
      .def("attach_radix_cache", &M::AttachRadixCache, py::arg("view"))
      .def("verify_records_now", &M::VerifyRecordsNow, py::arg("slot_indices"),
           py::arg("positions"), py::arg("prev_slot_indices"))
      .def("backup_records", &M::BackupRecords, py::arg("kind"), py::arg("host_indices"),
           py::arg("device_indices"), py::arg("host_k") = py::none(),
           py::arg("host_v") = py::none())
      .def("restore_records", &M::RestoreRecords, py::arg("kind"), py::arg("host_indices"),
           py::arg("device_indices"))
      .def("offload_to_store", &M::OffloadToStore, py::arg("kind"), py::arg("host_indices"),
           py::arg("store"), py::arg("key"))
      .def("load_from_store", &M::LoadFromStore, py::arg("kind"), py::arg("host_indices"),
           py::arg("store"), py::arg("key"), py::arg("host_k") = py::none(),
           py::arg("host_v") = py::none())
      .def("stats", &M::Stats)
      .def("metrics", &M::Metrics)
      .def(
          "canary_buffer",
          [](py::object self, py::handle kind, py::handle tail, py::handle v_half) {
            // torch when it imports (CPU or CUDA), else numpy (CPU): both read DLPack.
            const py::object exported = self.cast<M&>().CanaryBuffer(self, kind, tail, v_half);
            try {
              return py::module_::import("torch.utils.dlpack").attr("from_dlpack")(exported);
            } catch (py::error_already_set& error) {
              if (!error.matches(PyExc_ImportError)) throw;
            }
            return py::module_::import("numpy").attr("from_dlpack")(exported);
          },
          py::arg("kind"), py::arg("tail"), py::arg("v_half"))
      .def_property_readonly("capacities", [](const M& c) { return c.manager().capacities(); })
      .def_property_readonly("device_bytes", [](const M& c) { return c.manager().device_bytes(); })
      .def_property_readonly("record_bytes", [](const M& c) { return c.manager().record_bytes(); })
      .def_property_readonly("outer_step", [](const M& c) { return c.manager().outer_step(); })
      .def_property_readonly("sweep_passes", [](const M& c) { return c.manager().sweep_passes(); })
      .def_property_readonly("split_steps", [](const M& c) { return c.manager().split_steps(); });
  m.def(
      "walk_of_sequence",
      [](py::handle slots) {
        const runtime::RadixWalk walk = runtime::WalkOfSequence(Int64ListArg(slots, "slots"));
        return py::make_tuple(walk.slot_indices, walk.positions, walk.prev_slot_indices);
      },
      py::arg("slots"),
      "(slot_indices, positions, prev_slot_indices) of one sequence's slots, slot i at position "
      "i: the arguments of CanaryManager.verify_records_now.");
  m.def(
      "install",
      [](py::handle config, const py::kwargs& kwargs) {
        if (!py::isinstance<Config>(config)) {
          ThrowTypeError("kv-canary: config must be a kvcanary.runtime.Config, got ",
                         TypeName(config));
        }
        return M::Install(config.cast<const Config&>(), kwargs);
      },
      py::arg("config"));
}

}  // namespace

void Runtime_Register(py::module_& parent) {
  // Raised by end_step in mode raise: a RuntimeError carrying the rows (.rows) and the text.
  py::dict namespace_;
  namespace_["rows"] = py::tuple();
  static PyObject* corruption =
      PyErr_NewException("kvcanary.CorruptionError", PyExc_RuntimeError, namespace_.ptr());
  if (corruption == nullptr) throw py::error_already_set();
  parent.attr("CorruptionError") = py::handle(corruption);
  DlpackExport_Register(parent);

  py::module_ m = parent.def_submodule("runtime", "kvcanary's host runtime (kvcanary.runtime).");
  RegisterArgumentClasses(m);
  RegisterViolation(m);
  RegisterPerturbationEvent(m);
  RegisterAffectedRequest(m);
  RegisterPageStore(m);
  RegisterCanaryManager(m);
}

}  // namespace kvcanary::python
