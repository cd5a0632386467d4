#include "causeway/hlo/npy.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace causeway::hlo {
namespace npy_test {

using ::testing::HasSubstr;

// A header exactly as numpy 2.x writes it, padded to 128 bytes in all.
std::string NumpyFile(std::string_view dict, std::string_view data) {
  std::string header(dict);
  const size_t total = 10 + header.size() + 1;
  const size_t padded = ((total + 63) / 64) * 64;
  header.append(padded - total, ' ');
  header.push_back('\n');
  std::string out("\x93NUMPY\x01\x00", 8);
  out.push_back(static_cast<char>(header.size() & 0xFF));
  out.push_back(static_cast<char>(header.size() >> 8));
  return out + header + std::string(data);
}

Literal Iota(PrimitiveType type, std::vector<int64_t> dims) {
  Literal literal(Shape(type, std::move(dims)));
  VisitType(type, [&](auto tag) {
    using T = decltype(tag);
    auto data = literal.mutable_data<T>();
    for (size_t i = 0; i < data.size(); ++i) {
      if constexpr (std::is_same_v<T, BF16> || std::is_same_v<T, F16>) {
        data[i] = T(static_cast<float>(i) * 0.5f);
      } else if constexpr (kIsComplex<T>) {
        data[i] = T(static_cast<float>(i) * 0.5f, -static_cast<float>(i));
      } else if constexpr (kIsMinifloat<T>) {
        data[i] = T::FromDouble(static_cast<double>(i) * 0.5);
      } else if constexpr (kIsNarrowInt<T>) {
        data[i] = T::Wrap(static_cast<int64_t>(i));
      } else if constexpr (std::is_same_v<T, bool>) {
        data[i] = i % 3 == 0;
      } else {
        data[i] = static_cast<T>(i * 3);
      }
    }
  });
  return literal;
}

class NpyRoundTripTest : public ::testing::TestWithParam<PrimitiveType> {};

TEST_P(NpyRoundTripTest, SerializedArrayParsesBackIdentically) {
  Literal original = Iota(GetParam(), {2, 3});
  auto bytes = SerializeNpy(original);
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  EXPECT_EQ((bytes->size() - original.size_bytes()) % 64, 0u);
  auto parsed = ParseNpy(*bytes);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->shape().ToString(false), original.shape().ToString(false));
  EXPECT_EQ(*parsed, original);
}

INSTANTIATE_TEST_SUITE_P(
    AllTypes, NpyRoundTripTest,
    ::testing::Values(PrimitiveType::kPred, PrimitiveType::kS8,
                      PrimitiveType::kS16, PrimitiveType::kS32,
                      PrimitiveType::kS64, PrimitiveType::kU8,
                      PrimitiveType::kU16, PrimitiveType::kU32,
                      PrimitiveType::kU64, PrimitiveType::kF16,
                      PrimitiveType::kBF16, PrimitiveType::kF32,
                      PrimitiveType::kF64, PrimitiveType::kC64,
                      PrimitiveType::kC128));

TEST(NpyTest, ComplexIsWrittenAsNumpyComplex) {
  EXPECT_EQ(*NpyDescr(PrimitiveType::kC64), "<c8");
  EXPECT_EQ(*NpyDescr(PrimitiveType::kC128), "<c16");
}

TEST(NpyTest, ReadsANumpyWrittenComplexArray) {
  // np.array([1-2j, 0.5+0.25j], np.complex64): real part first.
  const float parts[] = {1, -2, 0.5f, 0.25f};
  std::string file = NumpyFile(
      "{'descr': '<c8', 'fortran_order': False, 'shape': (2,), }",
      std::string(reinterpret_cast<const char*>(parts), sizeof(parts)));
  auto parsed = ParseNpy(file);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->shape().ToString(false), "c64[2]");
  EXPECT_EQ(parsed->data<C64>()[0], C64(1, -2));
  EXPECT_EQ(parsed->data<C64>()[1], C64(0.5f, 0.25f));
}

TEST(NpyTest, WritesTheHeaderNumpyWrites) {
  Literal value = Iota(PrimitiveType::kF32, {2, 3});
  auto bytes = SerializeNpy(value);
  ASSERT_TRUE(bytes.ok());
  EXPECT_THAT(*bytes, HasSubstr("{'descr': '<f4', 'fortran_order': False, "
                                "'shape': (2, 3), }"));
  EXPECT_EQ((*bytes)[bytes->size() - value.size_bytes() - 1], '\n');
}

TEST(NpyTest, BfloatIsWrittenAsV2) {
  auto bytes = SerializeNpy(Iota(PrimitiveType::kBF16, {4}));
  ASSERT_TRUE(bytes.ok());
  EXPECT_THAT(*bytes, HasSubstr("'descr': '<V2'"));
  EXPECT_THAT(*bytes, HasSubstr("'shape': (4,)"));
}

TEST(NpyTest, ReadsANumpyWrittenBfloatArray) {
  // np.save of np.array([1, -2], ml_dtypes.bfloat16).
  const char data[] = {'\x80', '\x3f', '\x00', '\xc0'};
  auto literal = ParseNpy(
      NumpyFile("{'descr': '<V2', 'fortran_order': False, 'shape': (2,), }",
                std::string_view(data, 4)));
  ASSERT_TRUE(literal.ok()) << literal.status();
  EXPECT_EQ(literal->shape().type(), PrimitiveType::kBF16);
  EXPECT_EQ(literal->GetAsDouble(0), 1.0);
  EXPECT_EQ(literal->GetAsDouble(1), -2.0);
}

TEST(NpyTest, ReadsAScalar) {
  int32_t value = -7;
  auto literal = ParseNpy(
      NumpyFile("{'descr': '<i4', 'fortran_order': False, 'shape': (), }",
                std::string_view(reinterpret_cast<const char*>(&value), 4)));
  ASSERT_TRUE(literal.ok()) << literal.status();
  EXPECT_EQ(literal->shape().rank(), 0);
  EXPECT_EQ(literal->data<int32_t>()[0], -7);
}

TEST(NpyTest, ReadsVersionTwoHeaders) {
  std::string v1 = NumpyFile(
      "{'descr': '|u1', 'fortran_order': False, 'shape': (3,), }", "abc");
  // Same header with a 4-byte length.
  std::string v2("\x93NUMPY\x02\x00", 8);
  const uint32_t len = static_cast<uint32_t>(v1.size() - 10 - 3);
  v2.append(reinterpret_cast<const char*>(&len), 4);
  v2 += v1.substr(10);
  auto literal = ParseNpy(v2);
  ASSERT_TRUE(literal.ok()) << literal.status();
  EXPECT_EQ(literal->data<uint8_t>()[2], 'c');
}

TEST(NpyTest, FileRoundTrip) {
  const std::string path = ::testing::TempDir() + "/npy_test_round_trip.npy";
  Literal value = Iota(PrimitiveType::kS64, {3, 1, 2});
  ASSERT_TRUE(WriteNpy(path, value).ok());
  auto read = ReadNpy(path);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(*read, value);
}

TEST(NpyTest, MissingFileIsNotFoundNamingThePath) {
  auto read = ReadNpy("/nonexistent/dir/x.npy");
  EXPECT_EQ(read.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(read.status().message(), HasSubstr("/nonexistent/dir/x.npy"));
}

TEST(NpyTest, RefusesBadMagic) {
  auto read = ParseNpy("PK\x03\x04 this is a zip", "a.npy");
  EXPECT_EQ(read.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(read.status().message(), HasSubstr("a.npy"));
  EXPECT_THAT(read.status().message(), HasSubstr("magic"));
}

TEST(NpyTest, RefusesDataOfTheWrongSize) {
  auto read = ParseNpy(
      NumpyFile("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2), }",
                std::string(12, '\0')),
      "w.npy");
  EXPECT_EQ(read.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(read.status().message(), HasSubstr("needs 16 data bytes"));
  EXPECT_THAT(read.status().message(), HasSubstr("has 12"));
}

TEST(NpyTest, RefusesFortranOrder) {
  auto read = ParseNpy(
      NumpyFile("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2), }",
                std::string(16, '\0')),
      "f.npy");
  EXPECT_EQ(read.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(read.status().message(), HasSubstr("Fortran"));
}

TEST(NpyTest, RefusesBigEndianData) {
  auto read = ParseNpy(
      NumpyFile("{'descr': '>f4', 'fortran_order': False, 'shape': (1,), }",
                std::string(4, '\0')),
      "b.npy");
  EXPECT_EQ(read.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(read.status().message(), HasSubstr("unsupported dtype '>f4'"));
}

TEST(NpyTest, RefusesAnOversizedHeaderLength) {
  std::string bytes("\x93NUMPY\x02\x00\xff\xff\xff\x7f", 12);
  auto read = ParseNpy(bytes, "h.npy");
  EXPECT_EQ(read.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(read.status().message(), HasSubstr("larger than the limit"));
}

TEST(NpyTest, RefusesAGarbledHeader) {
  auto read = ParseNpy(
      NumpyFile("{'descr': '<f4', 'fortran_order': False, 'shape': (2 x), }",
                std::string(8, '\0')),
      "g.npy");
  EXPECT_EQ(read.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(read.status().message(), HasSubstr("shape"));
}

std::string TempPath(const std::string& name) {
  return ::testing::TempDir() + "/npy_test_" + std::to_string(getpid()) + "_" +
         name;
}

TEST(NpyTest, ReadRefusesADirectory) {
  auto read = ReadNpy(::testing::TempDir());
  EXPECT_EQ(read.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(read.status().message(), HasSubstr("is a directory"));
}

TEST(NpyTest, ReadChecksTheMagicBeforeReadingOn) {
  // /dev/zero never ends: only its first bytes may be read.
  auto read = ReadNpy("/dev/zero");
  EXPECT_EQ(read.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(read.status().message(), HasSubstr("/dev/zero"));
  EXPECT_THAT(read.status().message(), HasSubstr("magic"));
}

TEST(NpyTest, ReadRefusesBytesPastWhatTheHeaderDeclares) {
  const std::string path = TempPath("trailing.npy");
  std::ofstream(path, std::ios::binary)
      << NumpyFile("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }",
                   std::string(9, '\0'));
  auto read = ReadNpy(path);
  std::filesystem::remove(path);
  EXPECT_EQ(read.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(read.status().message(),
              HasSubstr("needs 8 data bytes, the file has more"));
}

TEST(NpyTest, ReadStopsAnEndlessStreamAfterTheDeclaredBytes) {
  const std::string path = TempPath("endless.fifo");
  ASSERT_EQ(mkfifo(path.c_str(), 0600), 0) << std::strerror(errno);
  signal(SIGPIPE, SIG_IGN);  // The writer learns of the close from EPIPE.
  std::thread writer([&] {
    const int fd = open(path.c_str(), O_WRONLY);
    if (fd < 0) return;
    const std::string header = NumpyFile(
        "{'descr': '<f4', 'fortran_order': False, 'shape': (4,), }", "");
    bool open_end = write(fd, header.data(), header.size()) > 0;
    const std::string chunk(4096, '\1');
    while (open_end) open_end = write(fd, chunk.data(), chunk.size()) > 0;
    close(fd);
  });
  auto read = ReadNpy(path);
  writer.join();
  std::filesystem::remove(path);
  EXPECT_EQ(read.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(read.status().message(), HasSubstr("the file has more"));
}

TEST(NpyTest, ReadRefusesAShapeLargerThanTheMachineBeforeReadingIt) {
  const std::string path = TempPath("huge.npy");
  std::ofstream(path, std::ios::binary) << NumpyFile(
      "{'descr': '<f8', 'fortran_order': False, 'shape': (1099511627776,), }",
      "");
  auto read = ReadNpy(path);
  std::filesystem::remove(path);
  EXPECT_EQ(read.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(read.status().message(), HasSubstr("more than this machine"));
}

TEST(NpyTest, RefusesTupleLiterals) {
  Literal tuple = Literal::MakeTuple({Iota(PrimitiveType::kF32, {1})});
  EXPECT_EQ(SerializeNpy(tuple).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace npy_test
}  // namespace causeway::hlo
