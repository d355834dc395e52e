// Row factories for the validation tables (validation_table.h): the ways one tensor argument can
// break the checks every op shares (absent, strided, another dtype, another rank or length, on
// another device, read-only), each with the exact message those checks raise. A row built here
// starts from the valid view of its argument, so one factory serves every op and every argument.
//
// The replacement tensors live in the case (KeptTensors) and count as outputs: a rejected call
// must leave them unchanged too.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "kvcanary/kvcanary.h"
#include "testutil.h"
#include "validation_table.h"
#include "validation_util.h"

namespace kvcanary::testing {

// One tensor argument of an op: where it sits in the argument struct, the name the messages give
// it, and the title the row names give it.
template <typename Args>
struct ArgRef {
  std::function<TensorView&(Args&)> field;
  std::string name;
  std::string title;
};

// An argument that is a member of the op's argument struct.
template <typename Args>
ArgRef<Args> OwnArg(TensorView Args::*member, std::string name, std::string title) {
  return {[member](Args& a) -> TensorView& { return a.*member; }, std::move(name),
          std::move(title)};
}

// OwnArg for the member `member` of the file's `Args`, named in messages as it is spelled.
#define KVC_ARG(member, title) ::kvcanary::testing::OwnArg(&Args::member, #member, title)

// An argument inside a part of the op's arguments (its PlanInputs, a plan view).
template <typename Args, typename Part>
ArgRef<Args> PartArg(Part Args::*part, TensorView Part::*member, std::string name,
                     std::string title) {
  return {[part, member](Args& a) -> TensorView& { return a.*part.*member; }, std::move(name),
          std::move(title)};
}
template <typename Args>
ArgRef<Args> InputArg(TensorView PlanInputs::*member, std::string name, std::string title) {
  return PartArg(&Args::inputs, member, std::move(name), std::move(title));
}

// The dtype as the messages print it (written out here, not taken from the library): the
// dtypes the tables use.
inline std::string TorchName(DType dtype) {
  const std::pair<DType, const char*> names[] = {
      {DType::kUInt8, "torch.uint8"},    {DType::kInt8, "torch.int8"},
      {DType::kInt32, "torch.int32"},    {DType::kInt64, "torch.int64"},
      {DType::kUInt64, "torch.uint64"},  {DType::kFloat32, "torch.float32"},
      {DType::kFloat64, "torch.float64"}};
  for (const auto& [d, name] : names) {
    if (d == dtype) return name;
  }
  return "an unnamed dtype";
}

// A shape as the messages print it: "(4, 1)", "(32,)".
inline std::string ShapeText(const std::vector<int64_t>& shape) {
  std::string text = "(";
  for (size_t d = 0; d < shape.size(); ++d) text += (d ? ", " : "") + std::to_string(shape[d]);
  return text + (shape.size() == 1 ? ",)" : ")");
}

inline std::vector<int64_t> ShapeOf(const TensorView& view) {
  std::vector<int64_t> shape;
  for (int d = 0; d < view.ndim(); ++d) shape.push_back(view.size(d));
  return shape;
}

// A fresh poisoned buffer that `c` keeps (and checks unchanged), seen as `dtype` with `shape` and
// `strides`; `elements` is how many elements of `dtype` it holds.
inline TensorView KeptBuffer(KeptTensors& c, DType dtype, int64_t elements,
                             const std::vector<int64_t>& shape,
                             const std::vector<int64_t>& strides = {}) {
  const int64_t words = std::max<int64_t>(1, (elements * ItemSize(dtype) + 7) / 8);
  HostTensor<int64_t>& buffer = c.KeepOutput(Poisoned<int64_t>({words}));
  return TensorView(buffer.data(), dtype, Device::CPU(), shape, strides);
}

// The valid view's memory seen with `shape` (the elements fit), else a kept buffer of that shape.
inline TensorView Reshaped(KeptTensors& c, const TensorView& good, std::vector<int64_t> shape) {
  int64_t elements = 1;
  for (int64_t d : shape) elements *= d;
  if (elements <= good.numel()) return TensorView(good.data(), good.dtype(), good.device(), shape);
  return KeptBuffer(c, good.dtype(), elements, shape);
}

template <typename Case>
using ArgOf = ArgRef<typename Case::OpArgs>;

// A row that replaces `arg` by what `bad` makes of its valid view.
template <typename Case>
RejectRow<Case> ReplaceRow(std::string name, ArgOf<Case> arg,
                           std::function<TensorView(Case&, const TensorView&)> bad,
                           std::string message) {
  return {std::move(name),
          [arg = std::move(arg), bad = std::move(bad)](Case& c, typename Case::OpArgs& a) {
            TensorView& field = arg.field(a);
            field = bad(c, field);
          },
          std::move(message)};
}

// `row` under the name its table has always used.
template <typename Case>
RejectRow<Case> Named(std::string name, RejectRow<Case> row) {
  row.name = std::move(name);
  return row;
}

// Makers of a replacement view for ReplaceRow: the valid view's memory with another layout, or
// its first `length` elements (a kept buffer when it holds fewer).
template <typename Case>
auto Restrided(std::vector<int64_t> shape, std::vector<int64_t> strides) {
  return [shape, strides](Case&, const TensorView& good) {
    return TensorView(good.data(), good.dtype(), good.device(), shape, strides);
  };
}
template <typename Case>
auto Resized(int64_t length) {
  return [length](Case& c, const TensorView& good) { return Reshaped(c, good, {length}); };
}

template <typename Case>
RejectRow<Case> MissingRow(std::string name, ArgOf<Case> arg) {
  const std::string message = "kv-canary: " + arg.name + " is required, got None";
  return ReplaceRow<Case>(
      std::move(name), std::move(arg), [](Case&, const TensorView&) { return TensorView(); },
      message);
}

inline std::vector<int64_t> StridesOf(const TensorView& view) {
  std::vector<int64_t> strides;
  for (int d = 0; d < view.ndim(); ++d) strides.push_back(view.stride(d));
  return strides;
}

// The valid shape read with its outer stride doubled from a kept buffer. A one-element tensor is
// always contiguous (torch's rule), so a length-1 argument becomes a strided pair.
template <typename Case>
RejectRow<Case> NotContiguousRow(const std::string& tag, ArgOf<Case> arg) {
  const std::string message = "kv-canary: " + arg.name + " must be contiguous";
  auto strided = [](Case& c, const TensorView& good) {
    std::vector<int64_t> shape = ShapeOf(good);
    std::vector<int64_t> strides = StridesOf(good);
    shape[0] = std::max<int64_t>(shape[0], 2);
    strides[0] *= 2;
    return KeptBuffer(c, good.dtype(), 2 * shape[0] * strides[0], shape, strides);
  };
  std::string name = tag + arg.title + "NotContiguous";
  return ReplaceRow<Case>(std::move(name), std::move(arg), strided, message);
}

// Its valid shape in a buffer of `dtype`; the expected dtype is the valid view's.
template <typename Case>
RejectRow<Case> WrongDtypeRow(const std::string& tag, ArgOf<Case> arg, DType expected,
                              DType dtype) {
  const std::string message = "kv-canary: " + arg.name + " must have dtype " + TorchName(expected) +
                              ", got " + TorchName(dtype);
  auto retyped = [dtype](Case& c, const TensorView& good) {
    return KeptBuffer(c, dtype, good.numel(), ShapeOf(good));
  };
  std::string name = tag + arg.title + "WrongDtype";
  return ReplaceRow<Case>(std::move(name), std::move(arg), retyped, message);
}

// Its memory seen with `shape`, of another rank than the `rank` the op wants.
template <typename Case>
RejectRow<Case> RankRow(const std::string& tag, ArgOf<Case> arg, int rank,
                        std::vector<int64_t> shape) {
  const std::string message = "kv-canary: " + arg.name + " must be " + std::to_string(rank) +
                              "-D, got shape " + ShapeText(shape);
  auto reshaped = [shape](Case& c, const TensorView& good) { return Reshaped(c, good, shape); };
  std::string name = tag + arg.title + "Not" + std::to_string(rank) + "D";
  return ReplaceRow<Case>(std::move(name), std::move(arg), reshaped, message);
}

// Its first `length` elements (or a kept buffer that long) where the op wants `expected`.
template <typename Case>
RejectRow<Case> LengthRow(const std::string& tag, ArgOf<Case> arg, int64_t expected,
                          int64_t length) {
  const std::string message = "kv-canary: " + arg.name + " length must be " +
                              std::to_string(expected) + ", got " + std::to_string(length);
  std::string name = tag + arg.title + "Length";
  return ReplaceRow<Case>(std::move(name), std::move(arg), Resized<Case>(length), message);
}

// Its memory claimed to live on cuda:0, where the op's `reference` argument is on the CPU.
template <typename Case>
RejectRow<Case> OtherDeviceRow(const std::string& tag, ArgOf<Case> arg,
                               const std::string& reference) {
  const std::string message =
      "kv-canary: " + arg.name + " must be on " + reference + "'s device cpu, got cuda:0";
  auto moved = [](Case&, const TensorView& good) { return OnCuda(good); };
  std::string name = tag + arg.title + "OnOtherDevice";
  return ReplaceRow<Case>(std::move(name), std::move(arg), moved, message);
}

// Its memory, read-only.
template <typename Case>
RejectRow<Case> ReadOnlyRow(const std::string& tag, ArgOf<Case> arg) {
  const std::string message = "kv-canary: " + arg.name + " must be writable";
  auto read_only = [](Case&, const TensorView& good) {
    return TensorView(good.data(), good.dtype(), good.device(), ShapeOf(good), StridesOf(good),
                      false);
  };
  std::string name = tag + arg.title + "ReadOnly";
  return ReplaceRow<Case>(std::move(name), std::move(arg), read_only, message);
}

// The PlanInputs tensors every plan stage checks, as the messages and row names give them.
template <typename Args>
struct PlanInputRefs {
  ArgRef<Args> req_pool_indices =
      InputArg<Args>(&PlanInputs::req_pool_indices, "req_pool_indices", "ReqPoolIndices");
  ArgRef<Args> prefix_lens = InputArg<Args>(&PlanInputs::prefix_lens, "prefix_lens", "PrefixLens");
  ArgRef<Args> extend_seq_lens =
      InputArg<Args>(&PlanInputs::extend_seq_lens, "extend_seq_lens", "ExtendSeqLens");
  ArgRef<Args> req_to_token =
      InputArg<Args>(&PlanInputs::req_to_token, "req_to_token", "ReqToToken");
  ArgRef<Args> lut = InputArg<Args>(&PlanInputs::full_to_swa_index_mapping, "lut_tensor", "Lut");
  ArgRef<Args> pool = InputArg<Args>(&PlanInputs::req_to_verify_expected_tokens,
                                     "req_to_verify_expected_tokens", "Pool");
  ArgRef<Args> valid_lens = InputArg<Args>(&PlanInputs::req_to_verify_expected_tokens_valid_lens,
                                           "req_to_verify_expected_tokens_valid_lens", "ValidLens");
};

// The LaunchContext tensors Verify and Write check, as the messages name them (the tables keep
// their own row names: use Named).
template <typename Args>
struct ContextRefs {
  ArgRef<Args> canary_buf = PartArg(&Args::context, &LaunchContext::canary_buf, "canary_buf", "");
  ArgRef<Args> ring = PartArg(&Args::context, &LaunchContext::violation_ring, "violation_ring", "");
  ArgRef<Args> write_index =
      PartArg(&Args::context, &LaunchContext::violation_write_index, "violation_write_index", "");
  ArgRef<Args> slot_run_counter =
      PartArg(&Args::context, &LaunchContext::slot_run_counter, "slot_run_counter", "");
  ArgRef<Args> kernel_run_counter =
      PartArg(&Args::context, &LaunchContext::kernel_run_counter, "kernel_run_counter", "");
  ArgRef<Args> chain_assert = PartArg(&Args::context, &LaunchContext::enable_chain_position_assert,
                                      "enable_chain_position_assert", "");
};

// The context's scalars, checked before anything is written: a negative source count (row
// `count_name`, also in the paired context) and an unknown hash mode (row `mode_name`). `op` is
// how the messages name the kernel ("canary_verify"). Case has a second state `paired`.
template <typename Case>
std::vector<RejectRow<Case>> ContextScalarRows(const std::string& count_name,
                                               const std::string& mode_name,
                                               const std::string& op) {
  using Args = typename Case::OpArgs;
  const std::string count_message = "kv-canary: " + op + ": num_sources must be in [0, 4], got -1";
  return {{count_name, [](Case&, Args& a) { a.context.num_real_kv_sources = -1; }, count_message},
          {"PairedContextIsValidatedBeforeAnythingIsWritten",
           [](Case& c, Args& a) {
             a.paired_context = c.paired.Context();
             a.paired_context->num_real_kv_sources = -1;
           },
           count_message},
          {mode_name, [](Case&, Args& a) { a.context.real_kv_hash_mode = 3; },
           "kv-canary: real_kv_hash_mode must be one of 0/1/2, got 3"}};
}

// A row that sets one scalar argument (a member of the op's arguments or of its PlanInputs).
template <typename Case, typename T, typename V>
RejectRow<Case> SetRow(std::string name, T Case::OpArgs::*member, V value, std::string message) {
  return {std::move(name), [member, value](Case&, typename Case::OpArgs& a) { a.*member = value; },
          std::move(message)};
}
template <typename Case, typename T, typename V>
RejectRow<Case> SetInputRow(std::string name, T PlanInputs::*member, V value, std::string message) {
  return {std::move(name),
          [member, value](Case&, typename Case::OpArgs& a) { a.inputs.*member = value; },
          std::move(message)};
}

// req_to_token as a [4, 8] slice (row stride 16) of a wider table, where the caller asked for
// SGLang's contiguity check on it.
template <typename Case>
RejectRow<Case> RequiredContiguousTableRow(std::string name) {
  return {std::move(name),
          [](Case& c, typename Case::OpArgs& a) {
            a.inputs.req_to_token = c.Keep(WideTable().buffer).view({4, 8}, {16, 1});
            a.inputs.require_contiguous_req_to_token = true;
          },
          "kv-canary: req_to_token must be contiguous"};
}

// A token pool given without its valid lengths (the plan-entries stage names itself).
template <typename Case>
RejectRow<Case> PoolWithoutValidLensRow(std::string name) {
  return {std::move(name),
          [](Case&, typename Case::OpArgs& a) {
            a.inputs.req_to_verify_expected_tokens_valid_lens = TensorView();
          },
          "kv-canary: launch_plan_entries_kernel requires req_to_verify_expected_tokens_valid_lens "
          "when req_to_verify_expected_tokens is set"};
}

// The expected-token pool ([4, 8] int32) and its valid lengths ([2] int64): contiguity, dtype,
// rank and length, the lengths given `valid_lens_length` elements.
template <typename Case>
std::vector<RejectRow<Case>> PoolRows(const std::string& tag, int64_t valid_lens_length) {
  const PlanInputRefs<typename Case::OpArgs> in;
  return {NotContiguousRow<Case>(tag, in.pool),
          WrongDtypeRow<Case>(tag, in.pool, DType::kInt32, DType::kInt64),
          RankRow<Case>(tag, in.pool, 2, {32}),
          NotContiguousRow<Case>(tag, in.valid_lens),
          WrongDtypeRow<Case>(tag, in.valid_lens, DType::kInt64, DType::kInt32),
          LengthRow<Case>(tag, in.valid_lens, 2, valid_lens_length)};
}

// The rows of several tables, in order.
template <typename Row, typename... More>
std::vector<Row> Concat(std::vector<Row> rows, const More&... more) {
  (rows.insert(rows.end(), more.begin(), more.end()), ...);
  return rows;
}

// The device as the messages print it (written out here, not taken from the library).
inline std::string DeviceText(Device device) {
  return device.type == DeviceType::kCUDA ? "cuda:0" : "dlpack_device_8:0";
}

// G9: every tensor of the call (`all_on` moves them) on `device` (cuda:0 or UnsupportedDevice()),
// which no backend of this build supports; the op reports it on its `reference` argument.
template <typename Case>
RejectRow<Case> AllOnDeviceRow(std::string name, Device device, const std::string& reference,
                               void (*all_on)(Device, typename Case::OpArgs&)) {
  return {std::move(name), [all_on, device](Case&, typename Case::OpArgs& a) { all_on(device, a); },
          "kv-canary: " + reference + " is on unsupported device " + DeviceText(device)};
}

// G9 on cuda:0 in a build without the CUDA backend (whose host memory is never touched): `name`,
// or no row in a CUDA build.
template <typename Case>
std::vector<RejectRow<Case>> CudaWithoutBackendRows(
    [[maybe_unused]] const std::string& name, [[maybe_unused]] const std::string& reference,
    [[maybe_unused]] void (*all_on)(Device, typename Case::OpArgs&)) {
#if !defined(KVC_HAVE_CUDA)
  return {AllOnDeviceRow<Case>(name, Device::CUDA(0), reference, all_on)};
#else
  return {};
#endif
}

// G9 on DLPack's Metal (every build) and, in a build without the CUDA backend, on cuda:0 (whose
// host memory is never touched), named "G9" + `op` + what they try.
template <typename Case>
std::vector<RejectRow<Case>> UnsupportedDeviceRows(const std::string& op,
                                                   const std::string& reference,
                                                   void (*all_on)(Device, typename Case::OpArgs&)) {
  std::vector<RejectRow<Case>> rows = {AllOnDeviceRow<Case>(
      "G9" + op + "AllOnUnsupportedDevice", UnsupportedDevice(), reference, all_on)};
  return Concat(std::move(rows), CudaWithoutBackendRows<Case>("G9" + op + "AllOnCudaWithoutBackend",
                                                              reference, all_on));
}

// A Verify or Write table: its listed rows, then ContextScalarRows and the G9 row of a build
// without the CUDA backend ("G9CudaWithoutTheCudaBackend", reported on canary_buf).
template <typename Case, size_t N>
std::vector<RejectRow<Case>> KernelTable(const RejectRow<Case> (&listed)[N],
                                         const std::string& count_name,
                                         const std::string& mode_name, const std::string& op,
                                         void (*all_on)(Device, typename Case::OpArgs&)) {
  return Concat(std::vector<RejectRow<Case>>(listed, listed + N),
                ContextScalarRows<Case>(count_name, mode_name, op),
                CudaWithoutBackendRows<Case>("G9CudaWithoutTheCudaBackend", "canary_buf", all_on));
}

}  // namespace kvcanary::testing
