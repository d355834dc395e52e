// launch_swa_translate_kernel: its argument table, validation and dispatch. In place allowed.
#include "cpu/backend.h"
#include "kvcanary/plan.h"
#include "ops/dispatch.h"
#include "ops/plan_inputs.h"
#include "ops/signature.h"

namespace kvcanary {
namespace {

// The output, which may be the input itself (an in-place translation).
sig::TensorSpec InPlaceOut(const TensorView& out, int64_t n) {
  sig::TensorSpec spec = sig::Out(out, "out_slot_indices", DType::kInt64, 1, sig::Exactly(n));
  spec.may_alias = "slot_indices";
  return spec;
}

}  // namespace

void SwaTranslate(const SwaTranslateArgs& args, StreamHandle stream) {
  const int64_t n = args.slot_indices.length();
  const sig::SpecList table = {sig::In(args.slot_indices, "slot_indices", DType::kInt64, 1),
                               sig::In(args.full_to_swa_index_mapping, "full_to_swa_index_mapping",
                                       DType::kInt64, 1, sig::AtLeast(1)),
                               InPlaceOut(args.out_slot_indices, n)};
  sig::CheckPresent(table);
  sig::CheckBounds(table);
  sig::CheckEach(table, sig::kWhole);
  sig::CheckPlacement(args.out_slot_indices, "out_slot_indices", table);
  const SwaTranslateParams params{args.slot_indices.data_as<const int64_t>(),
                                  args.out_slot_indices.data_as<int64_t>(), n,
                                  SwaLutOf(args.full_to_swa_index_mapping)};
  RunOnBackend(
      args.out_slot_indices, "out_slot_indices", "swa_translate",
      [&] { cpu::SwaTranslate(params); },
      [&](auto device) { return cuda::SwaTranslate(params, device, stream); });
}

}  // namespace kvcanary
