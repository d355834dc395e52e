// Real-KV sources spanning layers (RealKvSource::layer_addresses, a kvcanary addition): one source
// of N layers hashes exactly like N single-layer sources in the same order, a byte of any layer
// changes the fingerprint, and every refused layer table names itself and changes nothing.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "kvcanary/context.h"
#include "kvcanary/format.h"
#include "testutil.h"
#include "validation_table.h"
#include "validation_util.h"

namespace kvcanary::testing {
namespace {

constexpr int32_t kModeAll = static_cast<int32_t>(RealKvHashMode::kAll);
constexpr int32_t kModePartial = static_cast<int32_t>(RealKvHashMode::kPartial);

// `num_layers` [8, 64] uint8 layers (4 tokens of 16 bytes a row: page_size 4) of distinct bytes,
// and the table of their addresses.
struct Layers {
  explicit Layers(int num_layers) : addresses({num_layers}) {
    for (int layer = 0; layer < num_layers; ++layer) {
      kv.emplace_back(std::vector<int64_t>{8, 64});
      auto& bytes = kv.back().values();
      for (size_t i = 0; i < bytes.size(); ++i) {
        bytes[i] = static_cast<uint8_t>(i * 7 + static_cast<size_t>(layer) * 31 + 1);
      }
    }
    for (int layer = 0; layer < num_layers; ++layer) {
      addresses[layer] = static_cast<int64_t>(reinterpret_cast<uintptr_t>(kv[layer].data()));
    }
  }
  RealKvSource Single(int layer) const { return MakeRealKvSource(kv[layer].view(), 4, 16, 16); }
  RealKvSource Layered() const {
    RealKvSource source = Single(0);
    source.layer_addresses = addresses.view();
    return source;
  }

  std::vector<HostTensor<uint8_t>> kv;
  HostTensor<int64_t> addresses;
};

TEST(RealKvLayers, OneLayeredSourceEqualsTheSameLayersAsSources) {
  for (int n = 1; n <= kMaxRealKvSources; ++n) {
    Layers layers(n);
    std::vector<RealKvSource> singles;
    for (int layer = 0; layer < n; ++layer) singles.push_back(layers.Single(layer));
    const RealKvSource layered = layers.Layered();
    for (int32_t mode : {kModeAll, kModePartial}) {
      for (int64_t slot : {0, 5, 31, 32, 1000}) {  // 32 and past: outside the rows, hash 0s
        EXPECT_EQ(RealKvHash(&layered, 1, mode, slot), RealKvHash(singles.data(), n, mode, slot))
            << "layers " << n << " mode " << mode << " slot " << slot;
      }
    }
  }
}

TEST(RealKvLayers, ALayerOfTheLayeredSourceCombinesWithTheOtherSources) {
  Layers layers(3);
  Layers other(1);
  const RealKvSource mixed[2] = {other.Single(0), layers.Layered()};
  const RealKvSource flat[4] = {other.Single(0), layers.Single(0), layers.Single(1),
                                layers.Single(2)};
  EXPECT_EQ(RealKvHash(mixed, 2, kModeAll, 9), RealKvHash(flat, 4, kModeAll, 9));
}

TEST(RealKvLayers, AByteOfADeepLayerChangesOnlyItsSlotsFingerprint) {
  Layers layers(32);
  const RealKvSource layered = layers.Layered();
  const RealKvSource layer0 = layers.Single(0);
  const uint64_t deep_before = RealKvHash(&layered, 1, kModeAll, 6);
  const uint64_t other_before = RealKvHash(&layered, 1, kModeAll, 7);
  const uint64_t layer0_before = RealKvHash(&layer0, 1, kModeAll, 6);
  layers.kv[17].at(1, 2 * 16 + 3) ^= 0x40;  // slot 6: row 1, token 2, byte 3 of layer 17
  EXPECT_NE(RealKvHash(&layered, 1, kModeAll, 6), deep_before);
  EXPECT_EQ(RealKvHash(&layered, 1, kModeAll, 7), other_before);
  EXPECT_EQ(RealKvHash(&layer0, 1, kModeAll, 6), layer0_before);  // layer 0 alone cannot see it
}

TEST(RealKvLayers, TheLayerOrderIsPartOfTheHash) {
  Layers layers(2);
  RealKvSource swapped = layers.Layered();
  std::swap(layers.addresses[0], layers.addresses[1]);
  const uint64_t reversed = RealKvHash(&swapped, 1, kModeAll, 3);
  std::swap(layers.addresses[0], layers.addresses[1]);
  EXPECT_NE(RealKvHash(&swapped, 1, kModeAll, 3), reversed);
}

// --- R8: the layer table, through RealKvHash (validated like an op) ---

struct LayeredHashCase : KeptTensors {
  using OpArgs = RealKvSource;
  OpArgs Args() const { return layers.Layered(); }
  ByteSnapshot Snapshot() { return ByteSnapshot(layers.addresses, layers.kv[0], layers.kv[1]); }
  static void Run(const RealKvSource& source) { RealKvHash(&source, 1, kModeAll, 0); }

  Layers layers{2};
};

using LayerRow = RejectRow<LayeredHashCase>;

// A one-entry int64 table 4 bytes into an 8-byte aligned buffer (a fixed address, so the message
// can name it).
alignas(8) uint8_t misaligned_table_backing[16];
TensorView MisalignedTable(LayeredHashCase&) {
  return TensorView(misaligned_table_backing + 4, DType::kInt64, Device::CPU(), {1});
}
constexpr const char* kTable = "kv-canary: RealKvSource.layer_addresses ";

const LayerRow kLayerRows[] = {
    // Bounds first: the host reads the table's int64 addresses, so they must be aligned.
    {"BoundsMisalignedTable", [](auto& c, auto& s) { s.layer_addresses = MisalignedTable(c); },
     std::string(kTable) + "data must be 8-byte aligned for torch.int64, got address 0x" +
         AddressHex(misaligned_table_backing + 4)},
    {"R8WrongDType",
     [](auto& c, auto& s) { s.layer_addresses = Recast(c.layers.addresses, DType::kUInt8); },
     std::string(kTable) + "must have dtype torch.int64, got torch.uint8"},
    {"R8Not1D",
     [](auto& c, auto& s) {
       s.layer_addresses = c.layers.addresses.view({1, 2});
     },
     std::string(kTable) + "must be 1-D, got shape (1, 2)"},
    {"R8NotContiguous",
     [](auto& c, auto& s) { s.layer_addresses = Gapped(c.Keep(HostTensor<int64_t>({4}))); },
     std::string(kTable) + "must be contiguous"},
    {"R8NoLayers", [](auto& c, auto& s) { s.layer_addresses = c.layers.addresses.view({0}); },
     std::string(kTable) + "length must be in [1, 1024], got 0"},
    {"R8MoreThan1024Layers",
     [](auto& c, auto& s) { s.layer_addresses = c.Keep(HostTensor<int64_t>({1025})).view(); },
     std::string(kTable) + "length must be in [1, 1024], got 1025"},
    {"R8NullTable",
     [](auto&, auto& s) {
       s.layer_addresses = TensorView(nullptr, DType::kInt64, Device::CPU(), {3});
     },
     std::string(kTable) + "must not be a null pointer, got length 3"},
    {"R8TableOnAnotherDevice",
     [](auto& c, auto& s) { s.layer_addresses = OnCuda(c.layers.addresses); },
     std::string(kTable) + "must be on RealKvSource.tensor's device cpu, got cuda:0"},
    {"R8LayersTimesReadBytesPastInt64",
     [](auto& c, auto& s) {
       // Never read: a 2^61-byte token passes R2/R3 in a view whose rows are never touched.
       alignas(16) static uint8_t row[16];
       const int64_t huge = int64_t{1} << 61;
       s = RealKvSource{TensorView(row, DType::kUInt8, Device::CPU(), {1, huge}, {huge, 1}), 1,
                        huge, huge, c.Keep(HostTensor<int64_t>({8})).view()};
     },
     "kv-canary: RealKvSource layers x read_bytes per slot overflows: 8 * 2305843009213693952"},
};

KVC_REJECTION_TABLE(RealKvLayerRejects, LayeredHashCase, kLayerRows);

}  // namespace
}  // namespace kvcanary::testing
