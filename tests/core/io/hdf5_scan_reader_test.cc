#include "core/io/hdf5_scan_reader.h"

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/core/io/hdf5_test_files.h"
#include "tests/core/random_seed.h"

namespace tomo::core {
namespace {

using ::testing::HasSubstr;

std::string TempPath(const std::string& name) {
  return (std::filesystem::path(::testing::TempDir()) /
          (std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()) + "_" +
           name))
      .string();
}

// Integer counts in [100, 60000) on (frames, 5 rows, 7 columns): odd, non-square frames.
Array3D RandomCounts(int64_t frames, std::mt19937_64& random) {
  std::uniform_int_distribution<int> count(100, 59999);
  Array3D a({frames, 5, 7});
  for (int64_t i = 0; i < a.size(); ++i) a.data()[i] = static_cast<float>(count(random));
  return a;
}

void ExpectSame(const Array3D& got, const Array3D& want, int64_t want_offset = 0) {
  for (int64_t i = 0; i < got.size(); ++i) {
    ASSERT_EQ(got.data()[i], want.data()[want_offset + i]) << i;
  }
}

TEST(Hdf5ScanReaderTest, DataExchangeInBlocksThatCrossChunks) {
  const uint64_t seed = testing::TestSeed();
  SCOPED_TRACE(testing::SeedTrace(seed));
  std::mt19937_64 random(seed);
  const Array3D projections = RandomCounts(11, random), flats = RandomCounts(3, random),
                darks = RandomCounts(2, random);
  std::vector<double> theta;
  for (int i = 0; i < 11; ++i) theta.push_back(0.5 + 180.0 * i / 11);
  const std::string path = TempPath("scan.h5");
  testing::WriteDataExchange(path, projections, flats, darks, theta);

  absl::StatusOr<Hdf5ScanInfo> info = InspectHdf5Scan(path, Hdf5Layout::kAutomatic, "scan.h5");
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->layout, Hdf5Layout::kDataExchange);
  EXPECT_EQ(info->projections, 11);
  EXPECT_EQ(info->rows, 5);
  EXPECT_EQ(info->columns, 7);
  EXPECT_EQ(info->flats, 3);
  EXPECT_EQ(info->darks, 2);
  EXPECT_TRUE(info->has_angles);

  // 4 views per read: 11 = 4 + 4 + 3, each read crossing one-frame chunks.
  absl::StatusOr<Hdf5Scan> scan = ReadHdf5Scan(path, Hdf5Layout::kAutomatic, "scan.h5", 4);
  ASSERT_TRUE(scan.ok()) << scan.status();
  ASSERT_EQ(scan->projections.dims(), (Dims3{11, 5, 7}));
  ExpectSame(scan->projections, projections);
  ExpectSame(scan->flat_frames, flats);
  ExpectSame(scan->dark_frames, darks);
  ASSERT_EQ(scan->angles_deg.size(), 11u);
  for (int i = 0; i < 11; ++i) EXPECT_DOUBLE_EQ(scan->angles_deg[i], theta[i]);

  // Asking for the other layout names what is missing.
  EXPECT_EQ(InspectHdf5Scan(path, Hdf5Layout::kNxTomo, "scan.h5").status().code(),
            absl::StatusCode::kNotFound);
}

// Flats before and after the projections, darks first, an invalid frame in between, the
// angles in radians: the projections come out in order with their angles in degrees, and
// each flat knows how many projections came before it.
TEST(Hdf5ScanReaderTest, NxTomoSortsFramesByImageKey) {
  const uint64_t seed = testing::TestSeed();
  SCOPED_TRACE(testing::SeedTrace(seed));
  std::mt19937_64 random(seed);
  const std::vector<int32_t> keys = {2, 2, 1, 1, 0, 0, 0, 3, 0, 0, 0, 0, 1};
  const Array3D frames = RandomCounts(static_cast<int64_t>(keys.size()), random);
  std::vector<double> angles;
  for (size_t i = 0; i < keys.size(); ++i) angles.push_back(0.1 * static_cast<double>(i));
  const std::string path = TempPath("scan.nx");
  testing::WriteNxTomo(path, "entry0000", frames, keys, angles, "rad");

  absl::StatusOr<Hdf5Scan> scan = ReadHdf5Scan(path, Hdf5Layout::kAutomatic, "scan.nx", 2);
  ASSERT_TRUE(scan.ok()) << scan.status();
  EXPECT_EQ(scan->info.layout, Hdf5Layout::kNxTomo);
  EXPECT_EQ(scan->info.projections_dataset, "/entry0000/instrument/detector/data");
  ASSERT_EQ(scan->projections.dims(), (Dims3{7, 5, 7}));
  ASSERT_EQ(scan->flat_frames.dims(), (Dims3{3, 5, 7}));
  ASSERT_EQ(scan->dark_frames.dims(), (Dims3{2, 5, 7}));
  const int64_t frame = 35;
  const int projection_frames[7] = {4, 5, 6, 8, 9, 10, 11};
  for (int p = 0; p < 7; ++p) {
    for (int64_t i = 0; i < frame; ++i) {
      ASSERT_EQ(scan->projections.data()[p * frame + i],
                frames.data()[projection_frames[p] * frame + i]);
    }
    EXPECT_NEAR(scan->angles_deg[p], 0.1 * projection_frames[p] * 180.0 / M_PI, 1e-9);
  }
  for (int64_t i = 0; i < frame; ++i) {
    ASSERT_EQ(scan->flat_frames.data()[2 * frame + i], frames.data()[12 * frame + i]);
    ASSERT_EQ(scan->dark_frames.data()[frame + i], frames.data()[frame + i]);
  }
  EXPECT_THAT(scan->flat_positions, ::testing::ElementsAre(0, 0, 7));
}

TEST(Hdf5ScanReaderTest, RefusalsNameTheFileAndTheDataset) {
  const std::string text = TempPath("not.h5");
  std::ofstream(text) << "projections";
  absl::StatusOr<Hdf5ScanInfo> info = InspectHdf5Scan(text, Hdf5Layout::kAutomatic, "not.h5");
  EXPECT_EQ(info.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(info.status().message(), HasSubstr("not.h5: not an HDF5 file"));

  // Keys and frames of different counts.
  std::mt19937_64 random(1);
  const std::string keys = TempPath("keys.nx");
  testing::WriteNxTomo(keys, "entry", RandomCounts(4, random), {0, 0, 0}, {}, nullptr);
  info = InspectHdf5Scan(keys, Hdf5Layout::kAutomatic, "keys.nx");
  EXPECT_EQ(info.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(info.status().message(), HasSubstr("image_key has 3 keys"));

  // Angles of another count than the frames.
  const std::string angles = TempPath("angles.h5");
  testing::WriteDataExchange(angles, RandomCounts(4, random), Array3D(), Array3D(), {1, 2, 3});
  info = InspectHdf5Scan(angles, Hdf5Layout::kDataExchange, "angles.h5");
  EXPECT_THAT(info.status().message(), HasSubstr("/exchange/theta has 3 angles for 4 frames"));

  // Neither layout.
  const std::string empty = TempPath("empty.h5");
  H5Fclose(H5Fcreate(empty.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT));
  info = InspectHdf5Scan(empty, Hdf5Layout::kAutomatic, "empty.h5");
  EXPECT_THAT(info.status().message(), HasSubstr("neither /exchange/data"));
}

// A chunked dataset of the given shape that holds no written chunk: libhdf5 stores only its
// metadata, so a file of a few kilobytes can declare any shape.
void DeclareDataset(hid_t parent, const char* name, std::vector<hsize_t> dims,
                    hid_t type = H5T_STD_U16LE) {
  std::vector<hsize_t> chunk(dims.size(), 1);
  hid_t space = H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr);
  hid_t properties = H5Pcreate(H5P_DATASET_CREATE);
  H5Pset_chunk(properties, static_cast<int>(chunk.size()), chunk.data());
  hid_t dataset = H5Dcreate2(parent, name, type, space, H5P_DEFAULT, properties, H5P_DEFAULT);
  ASSERT_GE(dataset, 0) << name;
  H5Dclose(dataset);
  H5Pclose(properties);
  H5Sclose(space);
}

// Both calls refuse the file with `code`, naming `words`, and never crash.
void ExpectRefused(const std::string& path, absl::StatusCode code, const std::string& words) {
  absl::StatusOr<Hdf5ScanInfo> info = InspectHdf5Scan(path, Hdf5Layout::kAutomatic, "up.h5");
  EXPECT_EQ(info.status().code(), code) << info.status();
  EXPECT_THAT(info.status().message(), HasSubstr(words));
  absl::StatusOr<Hdf5Scan> scan = ReadHdf5Scan(path, Hdf5Layout::kAutomatic, "up.h5");
  EXPECT_EQ(scan.status().code(), code) << scan.status();
  EXPECT_THAT(scan.status().message(), HasSubstr(words));
}

// Hostile uploads: shapes read from the file are bounded before anything is allocated,
// and each refusal names the file, the dataset, the value and the limit.
TEST(Hdf5ScanReaderTest, AbsurdShapesAreRefusedBeforeAllocation) {
  const hsize_t huge = hsize_t{1} << 62;
  {  // NXtomo declaring 2^62 frames and as many image keys (read at inspection).
    const std::string path = TempPath("frames.nx");
    hid_t file = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    hid_t link = H5Pcreate(H5P_LINK_CREATE);
    H5Pset_create_intermediate_group(link, 1);
    hid_t detector =
        H5Gcreate2(file, "/entry/instrument/detector", link, H5P_DEFAULT, H5P_DEFAULT);
    DeclareDataset(detector, "data", {huge, 5, 7});
    DeclareDataset(detector, "image_key", {huge}, H5T_STD_I32LE);
    H5Gclose(detector);
    H5Pclose(link);
    H5Fclose(file);
    ExpectRefused(path, absl::StatusCode::kInvalidArgument,
                  "up.h5: /entry/instrument/detector/data declares 4611686018427387904 frames, "
                  "above the limit of 4194304");
  }
  {  // Data Exchange frames of 2^40 rows.
    const std::string path = TempPath("rows.h5");
    hid_t file = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    hid_t exchange = H5Gcreate2(file, "exchange", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    DeclareDataset(exchange, "data", {3, hsize_t{1} << 40, 7});
    H5Gclose(exchange);
    H5Fclose(file);
    ExpectRefused(path, absl::StatusCode::kInvalidArgument,
                  "up.h5: /exchange/data declares 1099511627776 rows per frame, above the limit "
                  "of 65536");
  }
  {  // An angle list of 2^62 values.
    const std::string path = TempPath("theta.h5");
    hid_t file = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    hid_t exchange = H5Gcreate2(file, "exchange", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    DeclareDataset(exchange, "data", {3, 5, 7});
    DeclareDataset(exchange, "theta", {huge}, H5T_IEEE_F64LE);
    H5Gclose(exchange);
    H5Fclose(file);
    ExpectRefused(path, absl::StatusCode::kInvalidArgument,
                  "/exchange/theta declares 4611686018427387904 values, above the limit");
  }
  {  // Many more flat frames than projections (all held at once).
    const std::string path = TempPath("flats.h5");
    hid_t file = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    hid_t exchange = H5Gcreate2(file, "exchange", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    DeclareDataset(exchange, "data", {3, 5, 7});
    DeclareDataset(exchange, "data_white", {4000000, 5, 7});
    H5Gclose(exchange);
    H5Fclose(file);
    ExpectRefused(path, absl::StatusCode::kInvalidArgument,
                  "up.h5: 4000000 flat frames, above the limit of 256 (the larger of 256 and the "
                  "3 projections)");
  }
  {  // Within every per-axis bound, but far too many samples for one read.
    const std::string path = TempPath("samples.h5");
    hid_t file = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    hid_t exchange = H5Gcreate2(file, "exchange", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    DeclareDataset(exchange, "data", {4194304, 65536, 65536});
    H5Gclose(exchange);
    H5Fclose(file);
    absl::StatusOr<Hdf5ScanInfo> info = InspectHdf5Scan(path, Hdf5Layout::kAutomatic, "up.h5");
    ASSERT_TRUE(info.ok()) << info.status();  // the caller compares it with its geometry
    EXPECT_EQ(info->rows, 65536);
    absl::StatusOr<Hdf5Scan> scan = ReadHdf5Scan(path, Hdf5Layout::kAutomatic, "up.h5");
    EXPECT_EQ(scan.status().code(), absl::StatusCode::kResourceExhausted);
    EXPECT_THAT(scan.status().message(), HasSubstr("exceed the limit of 68719476736 samples"));
  }
}

TEST(Hdf5ScanReaderTest, WrongRankTypeAndMissingPartsAreRefused) {
  {  // 2D projections.
    const std::string path = TempPath("rank.h5");
    hid_t file = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    hid_t exchange = H5Gcreate2(file, "exchange", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    DeclareDataset(exchange, "data", {5, 7});
    H5Gclose(exchange);
    H5Fclose(file);
    ExpectRefused(path, absl::StatusCode::kInvalidArgument,
                  "up.h5: /exchange/data is 2-dimensional; expected 3");
  }
  {  // Strings where samples belong.
    const std::string path = TempPath("type.h5");
    hid_t file = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    hid_t exchange = H5Gcreate2(file, "exchange", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    hid_t text = H5Tcopy(H5T_C_S1);
    H5Tset_size(text, 16);
    DeclareDataset(exchange, "data", {3, 5, 7}, text);
    H5Tclose(text);
    H5Gclose(exchange);
    H5Fclose(file);
    ExpectRefused(path, absl::StatusCode::kInvalidArgument,
                  "up.h5: /exchange/data holds no numbers");
  }
  {  // An integer of 3 bytes: not a standard type (libhdf5 mis-converts exotic ones).
    const std::string path = TempPath("exotic.h5");
    hid_t file = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    hid_t exchange = H5Gcreate2(file, "exchange", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    hid_t odd = H5Tcopy(H5T_STD_U32LE);
    H5Tset_precision(odd, 24);
    H5Tset_size(odd, 3);
    DeclareDataset(exchange, "data", {3, 5, 7}, odd);
    H5Tclose(odd);
    H5Gclose(exchange);
    H5Fclose(file);
    ExpectRefused(path, absl::StatusCode::kInvalidArgument,
                  "up.h5: /exchange/data holds samples of an unusual integer type (3 bytes, "
                  "precision 24 bits");
  }
  {  // NXtomo without its image keys.
    const std::string path = TempPath("nokeys.nx");
    hid_t file = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    hid_t link = H5Pcreate(H5P_LINK_CREATE);
    H5Pset_create_intermediate_group(link, 1);
    hid_t detector =
        H5Gcreate2(file, "/entry/instrument/detector", link, H5P_DEFAULT, H5P_DEFAULT);
    DeclareDataset(detector, "data", {3, 5, 7});
    H5Gclose(detector);
    H5Pclose(link);
    H5Fclose(file);
    ExpectRefused(path, absl::StatusCode::kNotFound,
                  "no /entry/instrument/detector/image_key");
  }
  {  // No angles: read, and said so (the runner refuses angles_from_file then).
    std::mt19937_64 random(2);
    const std::string path = TempPath("noangles.h5");
    testing::WriteDataExchange(path, RandomCounts(3, random), Array3D(), Array3D(), {});
    absl::StatusOr<Hdf5Scan> scan = ReadHdf5Scan(path, Hdf5Layout::kAutomatic, "up.h5");
    ASSERT_TRUE(scan.ok()) << scan.status();
    EXPECT_FALSE(scan->info.has_angles);
    EXPECT_TRUE(scan->angles_deg.empty());
  }
}

// The child-process probe gives the reader's own verdicts: OK for a good file (read whole),
// the refusal for a bad one.
TEST(Hdf5ScanReaderTest, ProbeInAChildGivesTheReadersVerdict) {
  const uint64_t seed = tomo::testing::TestSeed();
  SCOPED_TRACE(tomo::testing::SeedTrace(seed));
  std::mt19937_64 random(seed);
  const std::string good = TempPath("good.h5");
  testing::WriteDataExchange(good, RandomCounts(5, random), RandomCounts(2, random),
                             RandomCounts(1, random), {0, 36, 72, 108, 144});
  for (const bool read_frames : {false, true}) {
    EXPECT_TRUE(ProbeHdf5ScanInChild(good, Hdf5Layout::kAutomatic, "good.h5", read_frames).ok());
  }
  const std::string bad = TempPath("bad.h5");
  testing::WriteDataExchange(bad, RandomCounts(4, random), Array3D(), Array3D(), {1, 2, 3});
  const absl::Status s = ProbeHdf5ScanInChild(bad, Hdf5Layout::kAutomatic, "bad.h5", true);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "bad.h5: /exchange/theta has 3 angles for 4 frames of /exchange/data");
  EXPECT_EQ(ProbeHdf5ScanInChild(TempPath("missing.h5"), Hdf5Layout::kAutomatic, "missing.h5",
                                 false)
                .code(),
            absl::StatusCode::kNotFound);
}

// A child that does not answer in time is stopped and the file refused, naming the time;
// the probe comes back (the caller's job and tomod go on). A good file of 120 frames, read
// whole, with a deadline of a microsecond: the child has not even opened the file by then.
// With the default deadline (from the file's size) the same file passes.
TEST(Hdf5ScanReaderTest, ProbeThatDoesNotAnswerInTimeIsStopped) {
  const uint64_t seed = tomo::testing::TestSeed();
  SCOPED_TRACE(tomo::testing::SeedTrace(seed));
  std::mt19937_64 random(seed);
  const std::string path = TempPath("slow.h5");
  std::vector<double> angles(120);
  for (size_t i = 0; i < angles.size(); ++i) angles[i] = 1.5 * static_cast<double>(i);
  testing::WriteDataExchange(path, RandomCounts(120, random), RandomCounts(2, random),
                             RandomCounts(1, random), angles);
  const auto start = std::chrono::steady_clock::now();
  const absl::Status s = ProbeHdf5ScanInChild(path, Hdf5Layout::kAutomatic, "slow.h5", true,
                                              absl::Microseconds(1));
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << s;
  EXPECT_EQ(s.message(),
            "slow.h5: libhdf5 did not finish reading this file within 1us (in a separate "
            "process, now stopped); the file is refused");
  EXPECT_LT(seconds, 5.0);
  EXPECT_TRUE(ProbeHdf5ScanInChild(path, Hdf5Layout::kAutomatic, "slow.h5", true).ok());
}

// A valid file cut short at several places: refused (NOT_FOUND or INVALID_ARGUMENT), never a
// crash, and the file name in the message.
TEST(Hdf5ScanReaderTest, TruncatedFilesAreRefused) {
  const uint64_t seed = tomo::testing::TestSeed();
  SCOPED_TRACE(tomo::testing::SeedTrace(seed));
  std::mt19937_64 random(seed);
  const std::string whole = TempPath("whole.h5");
  testing::WriteDataExchange(whole, RandomCounts(6, random), RandomCounts(2, random),
                             RandomCounts(1, random), {0, 30, 60, 90, 120, 150});
  std::string bytes;
  {
    std::ifstream in(whole, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  ASSERT_GT(bytes.size(), 1000u);
  std::vector<size_t> cuts = {8, 100, 512, bytes.size() / 2, bytes.size() - 1};
  cuts.push_back(std::uniform_int_distribution<size_t>(1, bytes.size() - 1)(random));
  for (const size_t cut : cuts) {
    const std::string path = TempPath("cut.h5");
    std::ofstream(path, std::ios::binary | std::ios::trunc).write(bytes.data(),
                                                                  static_cast<std::streamsize>(cut));
    absl::StatusOr<Hdf5Scan> scan = ReadHdf5Scan(path, Hdf5Layout::kAutomatic, "cut.h5");
    ASSERT_FALSE(scan.ok()) << "cut at " << cut;
    EXPECT_TRUE(scan.status().code() == absl::StatusCode::kNotFound ||
                scan.status().code() == absl::StatusCode::kInvalidArgument)
        << scan.status();
    EXPECT_THAT(scan.status().message(), HasSubstr("cut.h5"));
  }
}

}  // namespace
}  // namespace tomo::core
