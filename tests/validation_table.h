// Table-driven validation tests: one row per check. A row names the check, says how it breaks a
// valid call, and gives the exact message (and category) the op must throw; the harness runs it
// from a fresh valid case and asserts that the op wrote nothing.
//
// A case type provides:
//   using OpArgs = ...;                     the op's argument struct
//   OpArgs Args() const;                    a valid call over the case's tensors
//   ByteSnapshot Snapshot();                every output the op could write
//   static void Run(const OpArgs& args);    the op
// and derives from KeptTensors, so a row can keep replacement tensors alive for the call
// (Keep) and add replacement outputs to the unchanged check (KeepOutput).
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "kvcanary/error.h"
#include "testutil.h"

namespace kvcanary::testing {

class KeptTensors {
 public:
  // Keeps `tensor` alive as long as the case; returns it in place.
  template <typename T>
  HostTensor<T>& Keep(HostTensor<T> tensor) {
    auto owned = std::make_shared<HostTensor<T>>(std::move(tensor));
    kept_.push_back(owned);
    return *owned;
  }
  // Keep, and also check that the rejected call left it unchanged.
  template <typename T>
  HostTensor<T>& KeepOutput(HostTensor<T> tensor) {
    HostTensor<T>& kept = Keep(std::move(tensor));
    outputs_.push_back({kept.data(), kept.bytes()});
    return kept;
  }
  void AddKeptOutputs(ByteSnapshot& snapshot) const {
    for (const auto& [data, bytes] : outputs_) snapshot.Add(data, bytes);
  }

 private:
  std::vector<std::shared_ptr<void>> kept_;
  std::vector<std::pair<const void*, size_t>> outputs_;
};

template <typename Case>
struct RejectRow {
  std::string name;  // the test's name: letters and digits
  std::function<void(Case& c, typename Case::OpArgs& args)> breaks;
  std::string message;
  Error::Category category = Error::Category::kValue;
};

// GoogleTest prints a failing row by its name.
template <typename Case>
void PrintTo(const RejectRow<Case>& row, std::ostream* os) {
  *os << row.name;
}

template <typename Case>
std::string RowName(const ::testing::TestParamInfo<RejectRow<Case>>& info) {
  return info.param.name;
}

template <typename Case>
void ExpectRowRejected(const RejectRow<Case>& row) {
  Case c;
  typename Case::OpArgs args = c.Args();
  row.breaks(c, args);
  ByteSnapshot before = c.Snapshot();
  c.AddKeptOutputs(before);
  try {
    Case::Run(args);
    ADD_FAILURE() << "expected kvcanary::Error: " << row.message;
  } catch (const Error& error) {
    EXPECT_EQ(std::string(error.what()), row.message);
    EXPECT_EQ(error.category(), row.category) << row.message;
  }
  EXPECT_TRUE(before.Unchanged()) << "a rejected call wrote an output";
}

// Runs the case's call as it stands (a valid one, or one the op accepts) and says whether it
// changed any output byte.
template <typename Case>
bool AcceptedCallWrites(Case& c) {
  const ByteSnapshot before = c.Snapshot();
  Case::Run(c.Args());
  return !before.Unchanged();
}

}  // namespace kvcanary::testing

// A parameterized suite `Suite` running every row of `rows` (a RejectRow<Case> array) through
// ExpectRowRejected, one test per row, named after it.
#define KVC_REJECTION_TABLE(Suite, Case, rows)                                                  \
  class Suite : public ::testing::TestWithParam<::kvcanary::testing::RejectRow<Case>> {};       \
  TEST_P(Suite, RaisesAndWritesNothing) { ::kvcanary::testing::ExpectRowRejected(GetParam()); } \
  INSTANTIATE_TEST_SUITE_P(Rows, Suite, ::testing::ValuesIn(rows),                              \
                           ::kvcanary::testing::RowName<Case>)
