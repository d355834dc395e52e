#include "runtime/blake2b.h"

#include <array>
#include <cstring>

#include "kvcanary/error.h"

namespace kvcanary::runtime {
namespace {

constexpr size_t kBlockBytes = 128;

// RFC 7693 §2.6: the SHA-512 initialization vector.
constexpr std::array<uint64_t, 8> kIv = {
    0x6A09E667F3BCC908ull, 0xBB67AE8584CAA73Bull, 0x3C6EF372FE94F82Bull, 0xA54FF53A5F1D36F1ull,
    0x510E527FADE682D1ull, 0x9B05688C2B3E6C1Full, 0x1F83D9ABFB41BD6Bull, 0x5BE0CD19137E2179ull};

// RFC 7693 §2.7: message word permutations; rounds 10 and 11 reuse rows 0 and 1.
constexpr uint8_t kSigma[10][16] = {
    {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15},
    {14, 10, 4, 8, 9, 15, 13, 6, 1, 12, 0, 2, 11, 7, 5, 3},
    {11, 8, 12, 0, 5, 2, 15, 13, 10, 14, 3, 6, 7, 1, 9, 4},
    {7, 9, 3, 1, 13, 12, 11, 14, 2, 6, 5, 10, 4, 0, 15, 8},
    {9, 0, 5, 7, 2, 4, 10, 15, 14, 1, 11, 12, 6, 8, 3, 13},
    {2, 12, 6, 10, 0, 11, 8, 3, 4, 13, 7, 5, 15, 14, 1, 9},
    {12, 5, 1, 15, 14, 13, 4, 10, 0, 7, 6, 3, 9, 2, 8, 11},
    {13, 11, 7, 14, 12, 1, 3, 9, 5, 0, 15, 4, 8, 6, 2, 10},
    {6, 15, 14, 9, 11, 3, 0, 8, 12, 2, 13, 7, 1, 4, 10, 5},
    {10, 2, 8, 4, 7, 6, 1, 5, 15, 11, 9, 14, 3, 12, 13, 0}};

constexpr uint64_t RotateRight(uint64_t x, int n) { return (x >> n) | (x << (64 - n)); }

uint64_t LoadLittleEndian64(const uint8_t* bytes) {
  uint64_t value = 0;
  for (int i = 7; i >= 0; --i) value = (value << 8) | bytes[i];
  return value;
}

// RFC 7693 §3.1, the mixing function G.
void Mix(std::array<uint64_t, 16>& v, int a, int b, int c, int d, uint64_t x, uint64_t y) {
  v[a] = v[a] + v[b] + x;
  v[d] = RotateRight(v[d] ^ v[a], 32);
  v[c] = v[c] + v[d];
  v[b] = RotateRight(v[b] ^ v[c], 24);
  v[a] = v[a] + v[b] + y;
  v[d] = RotateRight(v[d] ^ v[a], 16);
  v[c] = v[c] + v[d];
  v[b] = RotateRight(v[b] ^ v[c], 63);
}

// RFC 7693 §3.2, the compression function F. `bytes_so_far` is the offset counter t, which fits
// in 64 bits for any input held in memory (the high word of t stays 0).
void Compress(std::array<uint64_t, 8>& h, const uint8_t* block, uint64_t bytes_so_far,
              bool last) {
  std::array<uint64_t, 16> m;
  for (int i = 0; i < 16; ++i) m[i] = LoadLittleEndian64(block + 8 * i);
  std::array<uint64_t, 16> v;
  for (int i = 0; i < 8; ++i) {
    v[i] = h[i];
    v[i + 8] = kIv[i];
  }
  v[12] ^= bytes_so_far;
  if (last) v[14] = ~v[14];
  for (int round = 0; round < 12; ++round) {
    const uint8_t* s = kSigma[round % 10];
    Mix(v, 0, 4, 8, 12, m[s[0]], m[s[1]]);
    Mix(v, 1, 5, 9, 13, m[s[2]], m[s[3]]);
    Mix(v, 2, 6, 10, 14, m[s[4]], m[s[5]]);
    Mix(v, 3, 7, 11, 15, m[s[6]], m[s[7]]);
    Mix(v, 0, 5, 10, 15, m[s[8]], m[s[9]]);
    Mix(v, 1, 6, 11, 12, m[s[10]], m[s[11]]);
    Mix(v, 2, 7, 8, 13, m[s[12]], m[s[13]]);
    Mix(v, 3, 4, 9, 14, m[s[14]], m[s[15]]);
  }
  for (int i = 0; i < 8; ++i) h[i] ^= v[i] ^ v[i + 8];
}

}  // namespace

std::vector<uint8_t> Blake2b(const void* data, size_t size, size_t digest_bytes) {
  if (digest_bytes < 1 || digest_bytes > kBlake2bMaxDigestBytes) {
    ThrowError("kv-canary: BLAKE2b digest_bytes must be in [1, 64], got ", digest_bytes);
  }
  std::array<uint64_t, 8> h = kIv;
  // Parameter block word 0: digest length, key length 0, fanout 1, depth 1 (sequential mode).
  h[0] ^= 0x01010000ull ^ static_cast<uint64_t>(digest_bytes);

  const auto* input = static_cast<const uint8_t*>(data);
  uint64_t offset = 0;
  // Every full block except the last is compressed as non-final; the final block (possibly
  // partial, or empty for an empty input) is zero-padded and flagged.
  while (size - offset > kBlockBytes) {
    Compress(h, input + offset, offset + kBlockBytes, /*last=*/false);
    offset += kBlockBytes;
  }
  uint8_t last_block[kBlockBytes] = {};
  const size_t remaining = size - offset;
  if (remaining > 0) std::memcpy(last_block, input + offset, remaining);
  Compress(h, last_block, offset + remaining, /*last=*/true);

  std::vector<uint8_t> digest(digest_bytes);
  for (size_t i = 0; i < digest_bytes; ++i) {
    digest[i] = static_cast<uint8_t>(h[i / 8] >> (8 * (i % 8)));
  }
  return digest;
}

}  // namespace kvcanary::runtime
