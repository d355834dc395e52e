#include "runtime_canary.h"

#include <pybind11/stl.h>

#include "dlpack_export.h"
#include "kvcanary/error.h"
#include "kvcanary/runtime/violation_format.h"
#include "scalars.h"

namespace py = pybind11;

namespace kvcanary::python {
namespace {

constexpr const char* kBusyElsewhere =
    "kv-canary: CanaryManager is busy in another thread's call; the runtime is single-threaded, "
    "call it from one thread";

// Marks the runtime busy for one call that changes it, on this thread. Refused while any call
// runs: on another thread (the runtime is single-threaded; the GIL is released meanwhile) or on
// this one (a callback re-entering would change the runtime under the call in progress).
class ExclusiveCall {
 public:
  explicit ExclusiveCall(CallGate& gate) : gate_(gate) {
    if (gate_.busy.exchange(true)) {
      ThrowError(gate_.owner.load() == std::this_thread::get_id()
                     ? "kv-canary: a callback must not drive the CanaryManager it was called by; "
                       "only stats(), metrics(), canary_buffer() and the sizes may be read there"
                     : kBusyElsewhere);
    }
    gate_.owner = std::this_thread::get_id();
  }
  ~ExclusiveCall() {
    gate_.owner = std::thread::id();
    gate_.busy = false;
  }
  ExclusiveCall(const ExclusiveCall&) = delete;
  ExclusiveCall& operator=(const ExclusiveCall&) = delete;

 private:
  CallGate& gate_;
};

// kvcanary.CorruptionError(message) with .rows, raised as the current Python exception.
[[noreturn]] void RaiseCorruption(const std::string& message, const std::vector<Violation>& rows) {
  const py::object type = py::module_::import("kvcanary._kvcanary").attr("CorruptionError");
  py::object error = type(message);
  py::list listed;
  for (const Violation& row : rows) listed.append(py::cast(row));
  error.attr("rows") = listed;
  PyErr_SetObject(type.ptr(), error.ptr());
  throw py::error_already_set();
}

// The store of offload_to_store / load_from_store: a kvcanary.runtime.FilePageStore only.
runtime::PageStore& StoreArg(py::handle store) {
  if (!py::isinstance<PyFilePageStore>(store)) {
    ThrowTypeError("kv-canary: store must be a kvcanary.runtime.FilePageStore, got ",
                   TypeName(store));
  }
  return store.cast<PyFilePageStore&>().store;
}

// The host copy of layer 0 (verify_backup), imported into `scope` for the call.
runtime::HostLayer0 HostLayer0Arg(ImportScope& scope, py::handle host_k, py::handle host_v) {
  return runtime::HostLayer0{PagedLayerBytes(scope.Import(host_k, "host_k"), "host_k"),
                             PagedLayerBytes(scope.Import(host_v, "host_v"), "host_v")};
}

// Per-tag counters by launch tag name.
py::dict PerTag(const std::array<int64_t, kNumLaunchTags>& values) {
  py::dict out;
  for (int tag = 0; tag < kNumLaunchTags; ++tag)
    out[py::str(runtime::LaunchTagLabel(tag))] = values[tag];
  return out;
}

}  // namespace

void CallGate::CheckRead() const {
  if (busy && owner.load() != std::this_thread::get_id()) {
    ThrowError(kBusyElsewhere);
  }
}

PyCanaryManager::~PyCanaryManager() {
  // The runtime first (it may log through log_ and reads the tensors until it is gone).
  py::gil_scoped_release release;
  manager_.reset();
}

template <typename Call>
void PyCanaryManager::Run(Call&& call) {
  ExclusiveCall exclusive(gate_);
  pending_->Clear();
  call_rows_.clear();
  std::optional<std::string> violation;
  try {
    py::gil_scoped_release release;
    call();
  } catch (const runtime::ViolationError& error) {
    violation = error.what();
  } catch (...) {
    pending_->Clear();  // the runtime's own refusal is what the caller needs to see
    throw;
  }
  if (violation) {
    pending_->Clear();
    RaiseCorruption(*violation, call_rows_);
  }
  pending_->RaiseIfAny();
}

py::object PyCanaryManager::Install(const runtime::Config& config, const py::kwargs& kwargs) {
  InstallKeywords keywords;
  SetKeywords(keywords, InstallFields(), kwargs, "install");
  if (!keywords.log.is_none() && !PyCallable_Check(keywords.log.ptr())) {
    ThrowTypeError("kv-canary: log must be a callable(level, message) or None, got ",
                   TypeName(keywords.log));
  }
  auto canary = std::make_unique<PyCanaryManager>();
  canary->pending_ = std::make_shared<PendingError>();
  canary->install_scope_ = std::make_unique<ImportScope>();
  runtime::InstallArgs args = InstallArgsOf(keywords, *canary->install_scope_);
  if (!keywords.log.is_none()) {
    canary->log_ = std::make_unique<PyLogSink>(keywords.log, canary->pending_);
    args.log = canary->log_.get();
  }
  canary->kept_.append(keywords.req_to_token);
  canary->kept_.append(keywords.block_table);
  canary->kept_.append(py::cast(keywords.groups));
  canary->kept_.append(keywords.log);
  PyCanaryManager* self = canary.get();
  self->Run([&] { self->manager_ = runtime::CanaryManager::Install(config, args); });
  if (self->manager_ == nullptr) return py::none();  // mode none
  self->manager_->SetViolationListener([self](const ViolationRow& row, int64_t step) {
    py::gil_scoped_acquire gil;
    self->call_rows_.push_back(Violation{row, step});
    self->CallBack(self->violation_callback_, Violation{row, step}, step);
  });
  self->manager_->SetPerturbationListener([self](const runtime::PerturbationEvent& event) {
    py::gil_scoped_acquire gil;
    self->CallBack(self->perturbation_callback_, event);
  });
  return py::cast(std::move(canary));
}

int PyCanaryManager::Traverse(visitproc visit, void* arg) const {
  Py_VISIT(violation_callback_.ptr());
  Py_VISIT(perturbation_callback_.ptr());
  Py_VISIT(kept_.ptr());
  Py_VISIT(step_kept_.ptr());
  if (radix_ != nullptr) Py_VISIT(radix_->view().ptr());
  if (log_ != nullptr) Py_VISIT(log_->callable().ptr());
  return 0;
}

// Breaks the cycles; the runtime stays usable (no listener, no sweep view, stderr logging), as
// Python may clear an object of a cycle before it destroys any.
void PyCanaryManager::Clear() {
  violation_callback_ = py::none();
  perturbation_callback_ = py::none();
  if (manager_ != nullptr) manager_->AttachRadixCache(nullptr);
  radix_.reset();
  if (log_ != nullptr) log_->Release();
  kept_ = py::list();
  step_kept_ = py::list();
}

void PyCanaryManager::MarkInitFinished() {
  Run([&] { manager_->MarkInitFinished(); });
}

void PyCanaryManager::BeginStep(py::handle forwards, py::handle host) {
  auto scope = std::make_unique<ImportScope>();
  const runtime::StepInput input = StepInputOf(forwards, host, *scope);
  Run([&] { manager_->BeginStep(input); });
  // The runtime now reads these tensors; the previous step's are released.
  step_scope_ = std::move(scope);
  step_kept_ = py::list();
  step_kept_.append(forwards);
}

void PyCanaryManager::PreForward(py::handle inner) {
  const int index = Int32Arg(inner, "inner");
  Run([&] { manager_->PreForward(index); });
}

void PyCanaryManager::PostForward(py::handle inner) {
  const int index = Int32Arg(inner, "inner");
  Run([&] { manager_->PostForward(index); });
}

void PyCanaryManager::ReplayedForward(py::handle inner) {
  const int index = Int32Arg(inner, "inner");
  Run([&] { manager_->ReplayedForward(index); });
}

void PyCanaryManager::EndStep() {
  Run([&] { manager_->EndStep(); });
}

void PyCanaryManager::AbandonStep() {
  Run([&] { manager_->AbandonStep(); });
}

template <typename... Args>
void PyCanaryManager::CallBack(const py::object& slot, const Args&... args) {
  const py::object callback = slot;  // held while it runs, even if it replaces itself
  if (callback.is_none()) return;
  try {
    callback(args...);
  } catch (py::error_already_set& error) {
    pending_->Keep(error);
  }
}

void PyCanaryManager::SetCallback(py::object& slot, py::object callback, const char* signature) {
  if (!callback.is_none() && !PyCallable_Check(callback.ptr())) {
    ThrowTypeError("kv-canary: callback must be a ", signature, " or None, got ",
                   TypeName(callback));
  }
  ExclusiveCall exclusive(gate_);
  slot = std::move(callback);
}

void PyCanaryManager::OnViolation(py::object callback) {
  SetCallback(violation_callback_, std::move(callback), "callable(row, step)");
}

void PyCanaryManager::OnPerturbation(py::object callback) {
  SetCallback(perturbation_callback_, std::move(callback), "callable(event)");
}

py::list PyCanaryManager::PerturbNextTokens(py::handle sampled) {
  std::vector<int64_t> tokens = Int64ListArg(sampled, "sampled");
  Run([&] { manager_->PerturbNextTokens(tokens); });
  return py::cast(tokens);
}

std::vector<runtime::AffectedRequest> PyCanaryManager::TakeAffectedRequests() {
  std::vector<runtime::AffectedRequest> taken;
  Run([&] { taken = manager_->TakeAffectedRequests(); });
  return taken;
}

void PyCanaryManager::AttachRadixCache(py::object view) {
  std::unique_ptr<PyRadixView> radix;
  if (!view.is_none()) {
    for (const char* method : kRadixViewMethods) {
      if (!py::hasattr(view, method)) {
        ThrowTypeError("kv-canary: view must have a method ", method, "(), got ", TypeName(view));
      }
    }
    radix = std::make_unique<PyRadixView>(std::move(view), pending_);
  }
  ExclusiveCall exclusive(gate_);
  manager_->AttachRadixCache(radix.get());
  radix_ = std::move(radix);  // the previous view is released after the runtime let go of it
}

void PyCanaryManager::VerifyRecordsNow(py::handle slot_indices, py::handle positions,
                                       py::handle prev_slot_indices) {
  runtime::RadixWalk walk;
  walk.slot_indices = Int64ListArg(slot_indices, "slot_indices");
  walk.positions = Int64ListArg(positions, "positions");
  walk.prev_slot_indices = Int64ListArg(prev_slot_indices, "prev_slot_indices");
  Run([&] { manager_->VerifyRecordsNow(walk); });
}

void PyCanaryManager::BackupRecords(py::handle kind, py::handle host_indices,
                                    py::handle device_indices, py::handle host_k,
                                    py::handle host_v) {
  const runtime::GroupKind group = GroupKindArg(kind, "kind");
  const std::vector<int64_t> host = Int64ListArg(host_indices, "host_indices");
  const std::vector<int64_t> device = Int64ListArg(device_indices, "device_indices");
  ImportScope scope;  // the host layers are read during the call only
  const runtime::HostLayer0 layer = HostLayer0Arg(scope, host_k, host_v);
  Run([&] { manager_->BackupRecords(group, host, device, layer); });
}

void PyCanaryManager::RestoreRecords(py::handle kind, py::handle host_indices,
                                     py::handle device_indices) {
  const runtime::GroupKind group = GroupKindArg(kind, "kind");
  const std::vector<int64_t> host = Int64ListArg(host_indices, "host_indices");
  const std::vector<int64_t> device = Int64ListArg(device_indices, "device_indices");
  Run([&] { manager_->RestoreRecords(group, host, device); });
}

void PyCanaryManager::OffloadToStore(py::handle kind, py::handle host_indices, py::handle store,
                                     py::handle key) {
  const runtime::GroupKind group = GroupKindArg(kind, "kind");
  const std::vector<int64_t> host = Int64ListArg(host_indices, "host_indices");
  runtime::PageStore& page_store = StoreArg(store);
  const std::string page_key = StrArg(key, "key");
  Run([&] { manager_->OffloadToStore(group, host, page_store, page_key); });
}

runtime::StoreLoadResult PyCanaryManager::LoadFromStore(py::handle kind, py::handle host_indices,
                                                        py::handle store, py::handle key,
                                                        py::handle host_k, py::handle host_v) {
  const runtime::GroupKind group = GroupKindArg(kind, "kind");
  const std::vector<int64_t> host = Int64ListArg(host_indices, "host_indices");
  runtime::PageStore& page_store = StoreArg(store);
  const std::string page_key = StrArg(key, "key");
  ImportScope scope;
  const runtime::HostLayer0 layer = HostLayer0Arg(scope, host_k, host_v);
  runtime::StoreLoadResult result;
  Run([&] { result = manager_->LoadFromStore(group, host, page_store, page_key, layer); });
  return result;
}

py::dict PyCanaryManager::Stats() {
  gate_.CheckRead();
  const runtime::MetricsSnapshot s = manager_->Metrics();
  py::dict out;
  out["kernel_runs"] = PerTag(s.kernel_runs);
  out["protected_tokens"] = PerTag(s.protected_tokens);
  out["violations_by_tag"] = PerTag(s.violations_by_tag);
  out["violations_total"] = s.violations_total;
  out["rows_reported"] = s.rows_reported;
  out["untouched_rows_dropped"] = s.untouched_rows_dropped;
  out["split_steps"] = s.split_steps;
  out["skipped_steps"] = s.skipped_steps;
  out["sweep_passes"] = s.sweep_passes;
  out["health_checks"] = s.health_checks;
  out["last_violation_step"] = s.last_violation_step;
  out["ring_overflow"] = s.ring_overflow;
  out["swa_divergence_reports"] = s.swa_divergence_reports;
  out["swa_record_mismatches"] = s.swa_record_mismatches;
  out["swa_unmapped_in_window"] = s.swa_unmapped_in_window;
  out["swa_remapped"] = s.swa_remapped;
  out["swa_out_of_window"] = s.swa_out_of_window;
  out["l3_corrupt_loads"] = s.l3_corrupt_loads;
  return out;
}

std::string PyCanaryManager::Metrics() {
  gate_.CheckRead();
  return manager_->PrometheusText();
}

py::object PyCanaryManager::CanaryBuffer(py::object self, py::handle kind, py::handle tail,
                                         py::handle v_half) {
  const runtime::GroupKind group = GroupKindArg(kind, "kind");
  const bool tail_half = BoolArg(tail, "tail");
  const bool v = BoolArg(v_half, "v_half");
  gate_.CheckRead();
  const TensorView view = manager_->CanaryBuffer(group, tail_half, v);
  if (!view.defined()) {
    ThrowError("kv-canary: kind, tail, v_half must name a canary buffer of this install, got ",
               runtime::GroupKindName(group), tail_half ? " TAIL " : " HEAD ", v ? "V" : "K");
  }
  return ExportTensor(view, std::move(self));
}

}  // namespace kvcanary::python
