// kvcanary.runtime.CanaryManager: the C++ runtime::CanaryManager behind a Python object that keeps
// alive everything the runtime points at (the install tensors, each step's batch tensors until the
// next successful begin_step, the listener, the radix view and the log callable).
//
// Python code the runtime calls back (listener, radix view, log) never lets an exception unwind
// through the runtime: the first one is kept and raised when the runtime call returns. The GIL is
// released around every runtime call (callbacks take it back); a second thread calling in while a
// call runs is refused, since the runtime is single-threaded.
#pragma once

#include <pybind11/pybind11.h>

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "dlpack_import.h"
#include "kvcanary/runtime/canary_manager.h"
#include "runtime_args.h"
#include "runtime_callbacks.h"

namespace kvcanary::python {

// One violation row as Python sees it: the ViolationRow fields plus the step it was pumped at.
struct Violation {
  ViolationRow row;
  int64_t step = 0;
};

// kvcanary.runtime.FilePageStore: the L3 tier's file-per-key store, made from Python and passed to
// offload_to_store / load_from_store.
struct PyFilePageStore {
  explicit PyFilePageStore(const std::string& dir) : directory(dir), store(dir) {}
  std::string directory;
  runtime::FilePageStore store;
};

// Who is inside the runtime: set while a call that changes it runs (with the GIL released).
struct CallGate {
  std::atomic<bool> busy{false};
  std::atomic<std::thread::id> owner{};
  // Reads (stats, metrics, canary_buffer, sizes) hold the GIL throughout, so they only need to
  // wait out another thread's call; a callback of this thread's call may read.
  void CheckRead() const;
};

class PyCanaryManager {
 public:
  PyCanaryManager() = default;
  ~PyCanaryManager();

  // kvcanary.runtime.install(config, **kw): None for mode none.
  static pybind11::object Install(const runtime::Config& config, const pybind11::kwargs& kwargs);

  void MarkInitFinished();
  void BeginStep(pybind11::handle forwards, pybind11::handle host);
  void PreForward(pybind11::handle inner);
  void PostForward(pybind11::handle inner);
  void ReplayedForward(pybind11::handle inner);
  void EndStep();
  void AbandonStep();
  void OnViolation(pybind11::object callback);
  void OnPerturbation(pybind11::object callback);
  pybind11::list PerturbNextTokens(pybind11::handle sampled);
  std::vector<runtime::AffectedRequest> TakeAffectedRequests();
  void AttachRadixCache(pybind11::object view);
  // verify_records_now(slot_indices, positions, prev_slot_indices): VerifyRecordsNow of that walk.
  void VerifyRecordsNow(pybind11::handle slot_indices, pybind11::handle positions,
                        pybind11::handle prev_slot_indices);
  // Host offload: records of the (host, device) index pairs to the host mirror (with the host
  // copy of layer 0 for verify_backup) and back.
  void BackupRecords(pybind11::handle kind, pybind11::handle host_indices,
                     pybind11::handle device_indices, pybind11::handle host_k,
                     pybind11::handle host_v);
  void RestoreRecords(pybind11::handle kind, pybind11::handle host_indices,
                      pybind11::handle device_indices);
  // L3 tier: the host-mirror records of `host_indices` as one record blob in a FilePageStore
  // under `key`, and back (with the host copy of layer 0 for verify_backup).
  void OffloadToStore(pybind11::handle kind, pybind11::handle host_indices,
                      pybind11::handle store, pybind11::handle key);
  runtime::StoreLoadResult LoadFromStore(pybind11::handle kind, pybind11::handle host_indices,
                                         pybind11::handle store, pybind11::handle key,
                                         pybind11::handle host_k, pybind11::handle host_v);

  pybind11::dict Stats();
  std::string Metrics();
  pybind11::object CanaryBuffer(pybind11::object self, pybind11::handle kind, pybind11::handle tail,
                                pybind11::handle v_half);
  // The garbage collector's hooks (tp_traverse, tp_clear): the Python objects this one holds
  // that may lead back to it (a listener closing over the runtime is a cycle).
  int Traverse(visitproc visit, void* arg) const;
  void Clear();

  // The runtime, for a read (CallGate::CheckRead).
  const runtime::CanaryManager& manager() const {
    gate_.CheckRead();
    return *manager_;
  }

 private:
  // Runs `call` on the runtime with the GIL released, then raises a callback's exception, or a
  // CorruptionError for a ViolationError (rows: those the listener saw during the call).
  template <typename Call>
  void Run(Call&& call);
  // Calls a listener (GIL held); an exception it raises is kept for the end of the call.
  template <typename... Args>
  void CallBack(const pybind11::object& slot, const Args&... args);
  // Sets a listener slot: a callable matching `signature`, or None.
  void SetCallback(pybind11::object& slot, pybind11::object callback, const char* signature);

  // Held for the runtime's lifetime; declared before manager_ so they are destroyed after it.
  std::unique_ptr<ImportScope> install_scope_;
  std::unique_ptr<PyLogSink> log_;
  pybind11::list kept_;  // install tensors and the log callable
  std::shared_ptr<PendingError> pending_;
  std::unique_ptr<PyRadixView> radix_;
  pybind11::object violation_callback_ = pybind11::none();
  pybind11::object perturbation_callback_ = pybind11::none();
  std::unique_ptr<ImportScope> step_scope_;
  pybind11::list step_kept_;
  std::vector<Violation> call_rows_;  // rows reported during the current call
  CallGate gate_;
  std::unique_ptr<runtime::CanaryManager> manager_;
};

// Registers Violation, CanaryManager, the argument classes, install and CorruptionError in
// `module` (the _kvcanary.runtime submodule).
void Runtime_Register(pybind11::module_& module);

}  // namespace kvcanary::python
