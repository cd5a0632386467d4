// rng-bit-generator with XLA's algorithms, so that bits match XLA's (its
// RngBitGeneratorExpander over ThreeFryBitGenerator / PhiloxBitGenerator):
//
//  - the state's first u64 is the key; the rest is the counter;
//  - ThreeFry-2x32 (20 rounds): counter u64 state[1], one block per output
//    pair (32-bit outputs) or per output (64-bit outputs);
//  - Philox-4x32-10: a 128-bit counter (state[1] low, state[2] high; for a
//    u64[2] state the high half is the key itself), one block per four
//    32-bit outputs (two 64-bit outputs);
//  - outputs narrower than 32 bits are the low bits of 32-bit outputs;
//  - the new state is the key followed by the advanced counter.
// rng_default is Philox, as on XLA's CPU backend.
#include <array>
#include <cstdint>
#include <cstring>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "causeway/exec/kernel_util.h"
#include "causeway/exec/kernels.h"

namespace causeway::exec {
namespace {

using hlo::PrimitiveType;
using hlo::Shape;

inline uint32_t RotateLeft(uint32_t v, int distance) {
  return (v << distance) | (v >> (32 - distance));
}

// Threefry-2x32 with 20 rounds (Salmon et al., SC 2011).
std::array<uint32_t, 2> ThreeFry2x32(std::array<uint32_t, 2> x,
                                     std::array<uint32_t, 2> key) {
  static constexpr int kRotations[8] = {13, 15, 26, 6, 17, 29, 16, 24};
  const uint32_t ks[3] = {key[0], key[1], 0x1BD11BDAu ^ key[0] ^ key[1]};
  x[0] += ks[0];
  x[1] += ks[1];
  for (int block = 0; block < 5; ++block) {
    const int* rotations = kRotations + (block % 2) * 4;
    for (int r = 0; r < 4; ++r) {
      x[0] += x[1];
      x[1] = RotateLeft(x[1], rotations[r]);
      x[1] ^= x[0];
    }
    x[0] += ks[(block + 1) % 3];
    x[1] += ks[(block + 2) % 3] + static_cast<uint32_t>(block + 1);
  }
  return x;
}

// Philox-4x32 with 10 rounds.
std::array<uint32_t, 4> Philox4x32(std::array<uint32_t, 4> x,
                                   std::array<uint32_t, 2> key) {
  constexpr uint32_t kW32A = 0x9E3779B9u, kW32B = 0xBB67AE85u;
  constexpr uint64_t kM4x32A = 0xD2511F53u, kM4x32B = 0xCD9E8D57u;
  for (int round = 0; round < 10; ++round) {
    const uint64_t p0 = x[0] * kM4x32A;
    const uint64_t p1 = x[2] * kM4x32B;
    x = {static_cast<uint32_t>(p1 >> 32) ^ x[1] ^ key[0],
         static_cast<uint32_t>(p1),
         static_cast<uint32_t>(p0 >> 32) ^ x[3] ^ key[1],
         static_cast<uint32_t>(p0)};
    key[0] += kW32A;
    key[1] += kW32B;
  }
  return x;
}

inline std::array<uint32_t, 2> Split(uint64_t v) {
  return {static_cast<uint32_t>(v), static_cast<uint32_t>(v >> 32)};
}

// Where the 32-bit ThreeFry generator puts its two outputs per block: the
// output shape is split on its first even dimension (or its largest one)
// into halves, and output (.., s, ..) is output s % 2 of block (.., s/2, ..).
struct ThreeFrySplit {
  std::vector<int64_t> half_dims;
  int64_t split_dim = 0;
};

ThreeFrySplit SplitForThreeFry(const std::vector<int64_t>& dims) {
  ThreeFrySplit split;
  if (dims.empty()) {
    split.half_dims = {1};
    return split;
  }
  split.split_dim = -1;
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] % 2 == 0) {
      split.split_dim = static_cast<int64_t>(i);
      break;
    }
  }
  if (split.split_dim == -1) {
    for (size_t i = 0; i < dims.size(); ++i) {
      if (split.split_dim == -1 || dims[i] > dims[split.split_dim]) {
        split.split_dim = static_cast<int64_t>(i);
      }
    }
  }
  split.half_dims = dims;
  split.half_dims[split.split_dim] = (dims[split.split_dim] + 1) / 2;
  return split;
}

// 32-bit ThreeFry outputs for `dims` (row-major); advances `counter`.
std::vector<uint32_t> ThreeFryBits32(uint64_t key, uint64_t& counter,
                                     const std::vector<int64_t>& dims) {
  ThreeFrySplit split = SplitForThreeFry(dims);
  int64_t blocks = 1;
  for (int64_t d : split.half_dims) blocks *= d;
  std::vector<std::array<uint32_t, 2>> outputs(blocks);
  for (int64_t j = 0; j < blocks; ++j) {
    outputs[j] =
        ThreeFry2x32(Split(counter + static_cast<uint64_t>(j)), Split(key));
  }
  counter += static_cast<uint64_t>(blocks);
  int64_t count = 1;
  for (int64_t d : dims) count *= d;
  std::vector<uint32_t> bits(count);
  if (dims.empty()) {
    bits[0] = outputs[0][0];
    return bits;
  }
  // Row-major over dims: split the split-dim coordinate into block
  // coordinate and lane.
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < split.split_dim; ++i) outer *= dims[i];
  for (size_t i = split.split_dim + 1; i < dims.size(); ++i) inner *= dims[i];
  const int64_t size = dims[split.split_dim];
  const int64_t half = split.half_dims[split.split_dim];
  int64_t out = 0;
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t s = 0; s < size; ++s) {
      const int64_t block_row = (o * half + s / 2) * inner;
      const int lane = static_cast<int>(s % 2);
      for (int64_t i = 0; i < inner; ++i) {
        bits[out++] = outputs[block_row + i][lane];
      }
    }
  }
  return bits;
}

// 128-bit counter + `delta`.
inline std::array<uint64_t, 2> Add128(std::array<uint64_t, 2> counter,
                                      uint64_t delta) {
  const uint64_t low = counter[0] + delta;
  return {low, low < counter[0] ? counter[1] + 1 : counter[1]};
}

// `blocks` Philox blocks from `counter` (low, high); advances it.
std::vector<std::array<uint32_t, 4>> PhiloxBlocks(
    uint64_t key, std::array<uint64_t, 2>& counter, int64_t blocks) {
  std::vector<std::array<uint32_t, 4>> out(blocks);
  for (int64_t j = 0; j < blocks; ++j) {
    std::array<uint64_t, 2> c = Add128(counter, static_cast<uint64_t>(j));
    std::array<uint32_t, 2> lo = Split(c[0]), hi = Split(c[1]);
    out[j] = Philox4x32({lo[0], lo[1], hi[0], hi[1]}, Split(key));
  }
  counter = Add128(counter, static_cast<uint64_t>(blocks));
  return out;
}

template <typename Bits>
void StoreBits(const std::vector<Bits>& bits, Literal& out) {
  std::memcpy(out.mutable_untyped_data(), bits.data(),
              bits.size() * sizeof(Bits));
}

}  // namespace

absl::StatusOr<Literal> EvalRngBitGenerator(const Instruction& instr,
                                            const Literal& state) {
  const Shape& shape = instr.shape;
  if (!shape.IsTuple() || shape.tuple_shapes().size() != 2 ||
      !shape.tuple_shape(1).IsArray()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "rng-bit-generator ", instr.name,
        ": result must be a (state, bits) tuple, got ", shape.ToString()));
  }
  const Shape& state_shape = state.shape();
  if (state_shape.type() != PrimitiveType::kU64 || state_shape.rank() != 1 ||
      !shape.tuple_shape(0).Compatible(state_shape)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "rng-bit-generator ", instr.name, ": state must be a u64 vector ",
        "matching the result's state, got ", state_shape.ToString()));
  }
  const Shape& data_shape = shape.tuple_shape(1);
  const int64_t width = hlo::ByteWidth(data_shape.type());
  if (data_shape.type() == PrimitiveType::kPred || width > 8 || width < 1) {
    return absl::UnimplementedError(
        absl::StrCat("rng-bit-generator ", instr.name, ": output type ",
                     data_shape.ToString(), " is not supported"));
  }
  std::span<const uint64_t> s = state.data<uint64_t>();
  Literal new_state{Shape(PrimitiveType::kU64, state_shape.dims())};
  std::span<uint64_t> ns = new_state.mutable_data<uint64_t>();
  std::copy(s.begin(), s.end(), ns.begin());
  Literal bits{Shape(data_shape.type(), data_shape.dims())};
  const int64_t count = data_shape.ElementCount();

  hlo::RandomAlgorithm algorithm = instr.rng_algorithm;
  if (algorithm == hlo::RandomAlgorithm::kDefault) {
    algorithm = hlo::RandomAlgorithm::kPhilox;
  }
  if (algorithm == hlo::RandomAlgorithm::kThreeFry) {
    if (s.size() != 2) {
      return absl::InvalidArgumentError(
          absl::StrCat("rng-bit-generator ", instr.name,
                       ": rng_three_fry needs a u64[2] state, got ",
                       state_shape.ToString()));
    }
    uint64_t counter = s[1];
    if (width == 8) {
      std::vector<uint64_t> out(count);
      for (int64_t j = 0; j < count; ++j) {
        std::array<uint32_t, 2> x = ThreeFry2x32(
            Split(counter + static_cast<uint64_t>(j)), Split(s[0]));
        out[j] = x[0] | (static_cast<uint64_t>(x[1]) << 32);
      }
      counter += static_cast<uint64_t>(count);
      StoreBits(out, bits);
    } else {
      std::vector<uint32_t> out =
          ThreeFryBits32(s[0], counter, data_shape.dims());
      if (width == 4) {
        StoreBits(out, bits);
      } else if (width == 2) {
        StoreBits(std::vector<uint16_t>(out.begin(), out.end()), bits);
      } else {
        StoreBits(std::vector<uint8_t>(out.begin(), out.end()), bits);
      }
    }
    ns[1] = counter;
  } else {
    if (s.size() != 2 && s.size() != 3) {
      return absl::InvalidArgumentError(
          absl::StrCat("rng-bit-generator ", instr.name,
                       ": rng_philox needs a u64[2] or u64[3] state, got ",
                       state_shape.ToString()));
    }
    // A u64[2] state is reversed into the counter: (low s[1], high s[0]).
    std::array<uint64_t, 2> counter = {s[1], s.size() == 3 ? s[2] : s[0]};
    if (width == 8) {
      const int64_t pairs = (count + 1) / 2;
      std::vector<std::array<uint32_t, 4>> blocks =
          PhiloxBlocks(s[0], counter, (2 * count + 3) / 4);
      std::vector<uint64_t> out(count);
      for (int64_t i = 0; i < pairs; ++i) {
        const std::array<uint32_t, 4>& b = blocks[i];
        out[2 * i] = b[0] | (static_cast<uint64_t>(b[1]) << 32);
        if (2 * i + 1 < count) {
          out[2 * i + 1] = b[2] | (static_cast<uint64_t>(b[3]) << 32);
        }
      }
      StoreBits(out, bits);
    } else {
      std::vector<std::array<uint32_t, 4>> blocks =
          PhiloxBlocks(s[0], counter, (count + 3) / 4);
      std::vector<uint32_t> out(count);
      for (int64_t j = 0; j < count; ++j) out[j] = blocks[j / 4][j % 4];
      if (width == 4) {
        StoreBits(out, bits);
      } else if (width == 2) {
        StoreBits(std::vector<uint16_t>(out.begin(), out.end()), bits);
      } else {
        StoreBits(std::vector<uint8_t>(out.begin(), out.end()), bits);
      }
    }
    ns[1] = counter[0];
    if (s.size() == 3) ns[2] = counter[1];
  }
  std::vector<Literal> elements;
  elements.push_back(std::move(new_state));
  elements.push_back(std::move(bits));
  return Literal::MakeTuple(std::move(elements));
}

}  // namespace causeway::exec
