// Replays the seed corpus of every fuzz target (fuzz/corpus/<target>/) through its entry
// point in the ordinary gcc build, with deterministic mutations of each seed (every prefix
// length in 64 steps, every byte inverted in turn): the targets abort on a broken promise,
// so a regression in a parser's error handling fails here, in CI, without clang. The
// seeds themselves must be accepted by the parsers (a corpus of rejects would fuzz little).
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/io/dicom_ct_pd_reader.h"
#include "core/io/hdf5_scan_reader.h"
#include "core/io/tiff_stack_reader.h"
#include "fuzz/fuzz_targets.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runner/job_spec.h"
#include "tests/core/io/hdf5_test_files.h"

namespace tomo::fuzz {
namespace {

namespace fs = std::filesystem;

std::vector<std::string> Seeds(const std::string& target) {
  std::vector<std::string> seeds;
  for (const fs::directory_entry& entry :
       fs::directory_iterator(fs::path(TOMO_FUZZ_CORPUS_DIR) / target)) {
    std::ifstream in(entry.path(), std::ios::binary);
    seeds.emplace_back((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  }
  return seeds;
}

using Entry = int (*)(const uint8_t*, size_t);

// Returns how many inputs were run. flip_stride > 1 inverts every flip_stride-th byte only
// (for targets whose every input opens a file).
int64_t Replay(const std::vector<std::string>& seeds, Entry entry, size_t flip_stride = 1) {
  int64_t runs = 0;
  for (const std::string& seed : seeds) {
    const auto* bytes = reinterpret_cast<const uint8_t*>(seed.data());
    entry(bytes, seed.size());
    ++runs;
    const size_t step = std::max<size_t>(1, seed.size() / 64);
    for (size_t length = 0; length < seed.size(); length += step) {
      const std::vector<uint8_t> prefix(bytes, bytes + length);
      entry(prefix.data(), prefix.size());
      ++runs;
    }
    std::vector<uint8_t> flipped(bytes, bytes + seed.size());
    for (size_t i = 0; i < flipped.size(); i += flip_stride) {
      flipped[i] ^= 0xff;
      entry(flipped.data(), flipped.size());
      flipped[i] ^= 0xff;
      ++runs;
    }
  }
  return runs;
}

TEST(FuzzRegressionTest, DicomCtPdSeedsAndMutations) {
  const std::vector<std::string> seeds = Seeds("dicom_ct_pd");
  ASSERT_GE(seeds.size(), 2u);
  for (const std::string& seed : seeds) {
    EXPECT_TRUE(core::DecodeDicomCtPd({core::DicomBytes{"seed.dcm", seed.data(), seed.size()}}).ok());
  }
  EXPECT_GT(Replay(seeds, FuzzDicomCtPd), 1000);
}

// Inputs the fuzzers found (fuzz/regressions/<target>/), each named for what it did: they
// must now be refused cleanly.
TEST(FuzzRegressionTest, DicomCtPdFindingsAreRefused) {
  const fs::path dir = fs::path(TOMO_FUZZ_CORPUS_DIR).parent_path() / "regressions" / "dicom_ct_pd";
  int count = 0;
  for (const fs::directory_entry& entry : fs::directory_iterator(dir)) {
    std::ifstream in(entry.path(), std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    // oom_meta_group_length.dcm: 289 bytes whose meta header declares a 3.3 GB element,
    // which DCMTK allocated before noticing the end of the data.
    absl::Status s = core::ParseDicomCtPdHeader(bytes.data(), bytes.size(), "finding.dcm").status();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << entry.path();
    EXPECT_EQ(FuzzDicomCtPd(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()), 0);
    ++count;
  }
  EXPECT_GE(count, 1);
}

TEST(FuzzRegressionTest, TiffSeedsAndMutations) {
  const std::vector<std::string> seeds = Seeds("tiff");
  ASSERT_GE(seeds.size(), 2u);
  for (const std::string& seed : seeds) {
    EXPECT_TRUE(core::DecodeTiff(seed.data(), seed.size(), "seed.tif").ok());
  }
  EXPECT_GT(Replay(seeds, FuzzTiff), 500);
}

// HDF5 seeds made here by the tests' own writers (tests/core/io/hdf5_test_files.h): a Data
// Exchange scan with flats, darks and angles, and an NXtomo scan with every image key and
// angles in radians; the same files are fuzz/corpus/hdf5_scan/ for scripts/fuzz.
std::vector<std::string> MakeHdf5Seeds() {
  std::vector<std::string> seeds;
  const auto read = [](const fs::path& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  };
  const auto frames = [](int64_t count, float base) {
    core::Array3D a({count, 3, 2});
    for (int64_t i = 0; i < a.size(); ++i) a.data()[i] = base + static_cast<float>(i % 11);
    return a;
  };
  const fs::path dir = fs::path(::testing::TempDir());
  const fs::path exchange = dir / "seed_data_exchange.h5";
  tomo::testing::WriteDataExchange(exchange.string(), frames(4, 500), frames(2, 900),
                                   frames(1, 10), {0, 45, 90, 135});
  seeds.push_back(read(exchange));
  const fs::path nx = dir / "seed_nxtomo.nx";
  tomo::testing::WriteNxTomo(nx.string(), "entry0000", frames(6, 300), {2, 1, 0, 0, 3, 1},
                             {0, 0, 0, 1.5, 0, 0}, "rad");
  seeds.push_back(read(nx));
  return seeds;
}

TEST(FuzzRegressionTest, Hdf5ScanSeedsAndMutations) {
  const std::vector<std::string> seeds = MakeHdf5Seeds();
  // The committed corpus is these files (libhdf5 writes them byte for byte the same).
  EXPECT_EQ(Seeds("hdf5_scan").size(), seeds.size());
  for (const std::string& seed : seeds) {
    const fs::path path = fs::path(::testing::TempDir()) / "seed_check.h5";
    std::ofstream(path, std::ios::binary | std::ios::trunc) << seed;
    EXPECT_TRUE(core::ReadHdf5Scan(path.string(), core::Hdf5Layout::kAutomatic, "seed.h5").ok());
  }
  // Every third byte inverted: each input is a file libhdf5 opens (about 2 ms apiece).
  EXPECT_GT(Replay(seeds, FuzzHdf5Scan, 3), 8000);
}

// Files the HDF5 fuzzer made libhdf5 crash on (fuzz/regressions/hdf5_scan/), refused now:
// integer_type_of_65282_bytes.h5 (a stack overrun converting the samples, H5T__bit_get_d);
// unfiltered_chunk_stored_short.nx and unfiltered_chunks_stored_empty.nx (heap over-reads
// copying a chunk out of a shorter stored one, H5VM_memcpyvv).
TEST(FuzzRegressionTest, Hdf5ScanFindingsAreRefused) {
  const fs::path dir =
      fs::path(TOMO_FUZZ_CORPUS_DIR).parent_path() / "regressions" / "hdf5_scan";
  int count = 0;
  for (const fs::directory_entry& entry : fs::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    const absl::Status s =
        core::ReadHdf5Scan(entry.path().string(), core::Hdf5Layout::kAutomatic, name).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << name << ": " << s;
    EXPECT_THAT(std::string(s.message()),
                ::testing::HasSubstr(name.rfind("integer", 0) == 0
                                         ? "holds samples of an unusual integer type"
                                         : "uncompressed chunks; each should hold 12"))
        << name;
    std::ifstream in(entry.path(), std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    EXPECT_EQ(FuzzHdf5Scan(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()), 0);
    ++count;
  }
  EXPECT_EQ(count, 3);
}

// A file that crashes libhdf5 1.10 itself (a null copy in its metadata cache while summing
// the root group's B-tree node, H5G__node_sumup; found by the fuzzer, no check beforehand
// can see it): probed in a child process, the crash is the child's and comes back as the
// file's refusal, and this process goes on. Not read in-process here: that would crash.
TEST(FuzzRegressionTest, Hdf5ScanLibraryCrashesStayInTheChild) {
  const fs::path dir =
      fs::path(TOMO_FUZZ_CORPUS_DIR).parent_path() / "regressions" / "hdf5_scan_libhdf5_crashes";
  int count = 0;
  for (const fs::directory_entry& entry : fs::directory_iterator(dir)) {
    for (const bool read_frames : {false, true}) {
      const absl::Status s = core::ProbeHdf5ScanInChild(
          entry.path().string(), core::Hdf5Layout::kAutomatic, "upload.nx", read_frames);
      EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
      EXPECT_THAT(std::string(s.message()),
                  ::testing::HasSubstr("upload.nx: libhdf5 crashed reading this file (signal "));
    }
    ++count;
  }
  EXPECT_GE(count, 1);
}

TEST(FuzzRegressionTest, RawStreamSeedsAndMutations) {
  const std::vector<std::string> seeds = Seeds("raw_stream");
  ASSERT_GE(seeds.size(), 8u);
  EXPECT_GT(Replay(seeds, FuzzRawStream), 300);
}

TEST(FuzzRegressionTest, JobSpecSeedsAndMutations) {
  const std::vector<std::string> seeds = Seeds("job_spec");
  ASSERT_GE(seeds.size(), 6u);
  for (const std::string& seed : seeds) {
    tomoserve::v1::JobSpec spec;
    ASSERT_TRUE(spec.ParseFromString(seed));
    absl::Status valid = server::ValidateJobSpec(spec, server::ServerLimits()).status();
    EXPECT_TRUE(valid.ok()) << valid << "\n" << spec.DebugString();
  }
  EXPECT_GT(Replay(seeds, FuzzJobSpec), 1000);
}

// Specs whose file sizes sum past 2^64 (they crashed tomod before sizes were checked): now
// INVALID_ARGUMENT naming the file whose size overflows the sum.
TEST(FuzzRegressionTest, JobSpecFindingsAreRefused) {
  const fs::path dir = fs::path(TOMO_FUZZ_CORPUS_DIR).parent_path() / "regressions" / "job_spec";
  int count = 0;
  for (const fs::directory_entry& entry : fs::directory_iterator(dir)) {
    std::ifstream in(entry.path(), std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    tomoserve::v1::JobSpec spec;
    ASSERT_TRUE(spec.ParseFromString(bytes)) << entry.path();
    const absl::Status s = server::ValidateJobSpec(spec, server::ServerLimits()).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << entry.path() << ": " << s;
    EXPECT_THAT(std::string(s.message()), ::testing::HasSubstr("past 2^64 - 1")) << entry.path();
    EXPECT_EQ(FuzzJobSpec(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()), 0);
    ++count;
  }
  EXPECT_GE(count, 2);
}

TEST(FuzzRegressionTest, SubmitStreamSeedsAndMutations) {
  const std::vector<std::string> seeds = Seeds("submit_stream");
  ASSERT_GE(seeds.size(), 5u);
  // Each input ends with no job and no reservation left (the target aborts otherwise).
  EXPECT_GT(Replay(seeds, FuzzSubmitStream), 500);
}

}  // namespace
}  // namespace tomo::fuzz
