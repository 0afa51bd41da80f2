#include "core/io/hdf5_scan_reader.h"

#include <fcntl.h>
#include <hdf5.h>
#include <poll.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <csignal>
#include <cstdint>
#include <cmath>
#include <cstring>
#include <mutex>
#include <new>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "core/base/status_macros.h"

namespace tomo::core {
namespace {

constexpr int kImageKeyProjection = 0;
constexpr int kImageKeyFlat = 1;
constexpr int kImageKeyDark = 2;
constexpr hsize_t kMaxHdf5RootLinks = 1024;

// One libhdf5 identifier, closed with its own close function.
class Handle {
 public:
  Handle() = default;
  Handle(hid_t id, herr_t (*close)(hid_t)) : id_(id), close_(close) {}
  Handle(Handle&& other) noexcept : id_(std::exchange(other.id_, H5I_INVALID_HID)), close_(other.close_) {}
  Handle& operator=(Handle&& other) noexcept {
    if (this != &other) {
      Reset();
      id_ = std::exchange(other.id_, H5I_INVALID_HID);
      close_ = other.close_;
    }
    return *this;
  }
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  ~Handle() { Reset(); }
  hid_t get() const { return id_; }
  bool valid() const { return id_ >= 0; }

 private:
  void Reset() {
    if (id_ >= 0 && close_ != nullptr) close_(id_);
    id_ = H5I_INVALID_HID;
  }
  hid_t id_ = H5I_INVALID_HID;
  herr_t (*close_)(hid_t) = nullptr;
};

// Whether every link along an absolute path exists (H5Lexists needs its parents to).
bool PathExists(hid_t file, const std::string& path) {
  std::string prefix;
  for (absl::string_view part : absl::StrSplit(path, '/', absl::SkipEmpty())) {
    absl::StrAppend(&prefix, "/", part);
    if (H5Lexists(file, prefix.c_str(), H5P_DEFAULT) <= 0) return false;
  }
  return !prefix.empty();
}

// Whether a dataset's type is one of the standard integer or IEEE float types, either byte
// order. libhdf5 converts exotic layouts (a precision or bit offset that does not fill the
// bytes, odd sizes) with code that broken files have crashed (a stack overrun in
// H5T__bit_get_d, found by fuzz/hdf5_scan_fuzzer.cc), and detectors write the standard ones.
bool IsStandardNumberType(hid_t type) {
  // The predefined types are macros that open the library: listed at each call.
  const hid_t standard[] = {
      H5T_STD_U8LE,  H5T_STD_U8BE,  H5T_STD_I8LE,   H5T_STD_I8BE,   H5T_STD_U16LE,
      H5T_STD_U16BE, H5T_STD_I16LE, H5T_STD_I16BE,  H5T_STD_U32LE,  H5T_STD_U32BE,
      H5T_STD_I32LE, H5T_STD_I32BE, H5T_STD_U64LE,  H5T_STD_U64BE,  H5T_STD_I64LE,
      H5T_STD_I64BE, H5T_IEEE_F32LE, H5T_IEEE_F32BE, H5T_IEEE_F64LE, H5T_IEEE_F64BE};
  for (const hid_t candidate : standard) {
    if (H5Tequal(type, candidate) > 0) return true;
  }
  return false;
}

// Unfiltered chunks and compact data must hold exactly the bytes their shape says: libhdf5
// 1.10 copies a chunk's declared size out of a shorter stored one (a heap over-read found by
// fuzz/hdf5_scan_fuzzer.cc). Compressed chunks vary in size and are left to the filters.
absl::Status CheckStoredSize(hid_t dataset, const std::string& path, const std::string& name,
                             size_t type_bytes) {
  Handle plist(H5Dget_create_plist(dataset), H5Pclose);
  if (!plist.valid()) {
    return absl::InvalidArgumentError(absl::StrCat(name, ": cannot read the layout of ", path));
  }
  const H5D_layout_t layout = H5Pget_layout(plist.get());
  const hsize_t stored = H5Dget_storage_size(dataset);
  if (layout == H5D_COMPACT) {
    Handle space(H5Dget_space(dataset), H5Sclose);
    const hssize_t points = space.valid() ? H5Sget_simple_extent_npoints(space.get()) : -1;
    if (points < 0 || static_cast<unsigned __int128>(points) * type_bytes != stored) {
      return absl::InvalidArgumentError(absl::StrCat(
          name, ": ", path, " stores ", stored, " bytes for ", points, " values of ",
          type_bytes, " bytes"));
    }
  } else if (layout == H5D_CHUNKED && H5Pget_nfilters(plist.get()) == 0) {
    hsize_t chunk[H5S_MAX_RANK] = {};
    const int rank = H5Pget_chunk(plist.get(), H5S_MAX_RANK, chunk);
    hsize_t chunks = 0;
    Handle space(H5Dget_space(dataset), H5Sclose);
    if (rank < 1 || !space.valid() || H5Dget_num_chunks(dataset, space.get(), &chunks) < 0) {
      return absl::InvalidArgumentError(absl::StrCat(name, ": cannot read the chunks of ", path));
    }
    unsigned __int128 chunk_bytes = type_bytes;
    for (int axis = 0; axis < rank; ++axis) chunk_bytes *= chunk[axis];
    if (chunk_bytes == 0 || static_cast<unsigned __int128>(chunks) * chunk_bytes != stored) {
      return absl::InvalidArgumentError(absl::StrCat(
          name, ": ", path, " stores ", stored, " bytes in ", chunks,
          " uncompressed chunks; each should hold ", static_cast<uint64_t>(chunk_bytes)));
    }
  }
  return absl::OkStatus();
}

struct Dataset {
  Handle handle;
  std::string path;
  std::vector<hsize_t> dims;
};

absl::StatusOr<Dataset> OpenDataset(hid_t file, const std::string& path,
                                    const std::string& name, int rank) {
  Dataset dataset;
  dataset.path = path;
  dataset.handle = Handle(H5Dopen2(file, path.c_str(), H5P_DEFAULT), H5Dclose);
  if (!dataset.handle.valid()) {
    return absl::InvalidArgumentError(absl::StrCat(name, ": ", path, " is not a dataset"));
  }
  Handle type(H5Dget_type(dataset.handle.get()), H5Tclose);
  const H5T_class_t type_class = type.valid() ? H5Tget_class(type.get()) : H5T_NO_CLASS;
  if (type_class != H5T_INTEGER && type_class != H5T_FLOAT) {
    return absl::InvalidArgumentError(absl::StrCat(
        name, ": ", path, " holds no numbers (HDF5 type class ", static_cast<int>(type_class),
        "); expected integer or floating-point samples"));
  }
  if (!IsStandardNumberType(type.get())) {
    return absl::InvalidArgumentError(absl::StrCat(
        name, ": ", path, " holds samples of an unusual ",
        type_class == H5T_INTEGER ? "integer" : "floating-point", " type (",
        H5Tget_size(type.get()), " bytes, precision ", H5Tget_precision(type.get()),
        " bits, offset ", H5Tget_offset(type.get()),
        "); supported: 8-, 16-, 32- and 64-bit integers and 32- and 64-bit IEEE floats"));
  }
  Handle space(H5Dget_space(dataset.handle.get()), H5Sclose);
  const int ndims = space.valid() ? H5Sget_simple_extent_ndims(space.get()) : -1;
  if (ndims != rank) {
    return absl::InvalidArgumentError(absl::StrCat(
        name, ": ", path, " is ", ndims, "-dimensional; expected ", rank,
        rank == 3 ? " (frames, rows, columns)" : " (one value per frame)"));
  }
  dataset.dims.resize(static_cast<size_t>(rank));
  if (H5Sget_simple_extent_dims(space.get(), dataset.dims.data(), nullptr) != rank) {
    return absl::InvalidArgumentError(absl::StrCat(name, ": cannot read the shape of ", path));
  }
  // The file's own numbers are bounded before anything is sized by them.
  if (dataset.dims[0] > static_cast<hsize_t>(kMaxHdf5Frames)) {
    return absl::InvalidArgumentError(absl::StrCat(
        name, ": ", path, " declares ", dataset.dims[0],
        rank == 3 ? " frames" : " values", ", above the limit of ", kMaxHdf5Frames));
  }
  for (int axis = 1; axis < rank; ++axis) {
    if (dataset.dims[static_cast<size_t>(axis)] > static_cast<hsize_t>(kMaxHdf5FrameSide)) {
      return absl::InvalidArgumentError(absl::StrCat(
          name, ": ", path, " declares ", dataset.dims[static_cast<size_t>(axis)],
          axis == 1 ? " rows" : " columns", " per frame, above the limit of ",
          kMaxHdf5FrameSide));
    }
  }
  TOMO_RETURN_IF_ERROR(CheckStoredSize(dataset.handle.get(), path, name, H5Tget_size(type.get())));
  return dataset;
}

// Frames [first, first + count) of a 3D dataset into out (count x rows x columns floats),
// converted by libhdf5.
absl::Status ReadFrames(const Dataset& dataset, int64_t first, int64_t count, float* out,
                        const std::string& name) {
  if (count == 0) return absl::OkStatus();
  const hsize_t start[3] = {static_cast<hsize_t>(first), 0, 0};
  const hsize_t block[3] = {static_cast<hsize_t>(count), dataset.dims[1], dataset.dims[2]};
  Handle file_space(H5Dget_space(dataset.handle.get()), H5Sclose);
  Handle memory_space(H5Screate_simple(3, block, nullptr), H5Sclose);
  if (!file_space.valid() || !memory_space.valid() ||
      H5Sselect_hyperslab(file_space.get(), H5S_SELECT_SET, start, nullptr, block, nullptr) < 0 ||
      H5Dread(dataset.handle.get(), H5T_NATIVE_FLOAT, memory_space.get(), file_space.get(),
              H5P_DEFAULT, out) < 0) {
    return absl::InvalidArgumentError(absl::StrCat(name, ": cannot read frames ", first, " to ",
                                                   first + count - 1, " of ", dataset.path));
  }
  return absl::OkStatus();
}

template <typename T>
absl::StatusOr<std::vector<T>> ReadVector(const Dataset& dataset, hid_t memory_type,
                                          const std::string& name) {
  std::vector<T> values(static_cast<size_t>(dataset.dims[0]));
  if (!values.empty() && H5Dread(dataset.handle.get(), memory_type, H5S_ALL, H5S_ALL,
                                 H5P_DEFAULT, values.data()) < 0) {
    return absl::InvalidArgumentError(absl::StrCat(name, ": cannot read ", dataset.path));
  }
  return values;
}

// Whether a dataset's "units" attribute names radians (degrees when absent or otherwise).
bool UnitsAreRadians(const Dataset& dataset) {
  if (H5Aexists(dataset.handle.get(), "units") <= 0) return false;
  Handle attribute(H5Aopen(dataset.handle.get(), "units", H5P_DEFAULT), H5Aclose);
  Handle type(H5Aget_type(attribute.get()), H5Tclose);
  if (!attribute.valid() || !type.valid() || H5Tget_class(type.get()) != H5T_STRING) {
    return false;
  }
  std::string units;
  if (H5Tis_variable_str(type.get()) > 0) {
    char* text = nullptr;
    Handle memory_type(H5Tcopy(H5T_C_S1), H5Tclose);
    H5Tset_size(memory_type.get(), H5T_VARIABLE);
    if (H5Aread(attribute.get(), memory_type.get(), &text) >= 0 && text != nullptr) {
      units = text;
      H5free_memory(text);
    }
  } else {
    const size_t size = H5Tget_size(type.get());
    if (size == 0 || size > 256) return false;  // no unit name is that long
    std::string buffer(size + 1, '\0');
    Handle memory_type(H5Tcopy(H5T_C_S1), H5Tclose);
    H5Tset_size(memory_type.get(), size + 1);
    if (H5Aread(attribute.get(), memory_type.get(), buffer.data()) >= 0) {
      units = buffer.c_str();
    }
  }
  units = absl::AsciiStrToLower(absl::StripAsciiWhitespace(units));
  return units == "rad" || units == "radian" || units == "radians";
}

absl::StatusOr<std::vector<double>> ReadAnglesDeg(const Dataset& dataset,
                                                  const std::string& name) {
  TOMO_ASSIGN_OR_RETURN(std::vector<double> angles,
                        ReadVector<double>(dataset, H5T_NATIVE_DOUBLE, name));
  const bool radians = UnitsAreRadians(dataset);
  for (size_t i = 0; i < angles.size(); ++i) {
    if (!std::isfinite(angles[i])) {
      return absl::InvalidArgumentError(absl::StrCat(name, ": ", dataset.path, "[", i, "] is ",
                                                     angles[i], ", not a finite angle"));
    }
    if (radians) angles[i] *= 180.0 / M_PI;
  }
  return angles;
}

// The open file and the datasets of its layout.
struct Layout {
  Handle file;
  Hdf5ScanInfo info;
  Dataset data;                   // projections (Data Exchange) or every frame (NXtomo)
  std::optional<Dataset> flats;   // Data Exchange
  std::optional<Dataset> darks;   // Data Exchange
  std::optional<Dataset> angles;  // theta or rotation_angle
  std::vector<int32_t> image_keys;  // NXtomo: one per frame of data
};

absl::StatusOr<Layout> OpenLayout(const std::string& path, Hdf5Layout wanted,
                                  const std::string& name) {
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);  // errors become statuses, not stderr text
  Layout layout;
#if H5_VERSION_GE(1, 12, 0)
  const htri_t is_hdf5 = H5Fis_accessible(path.c_str(), H5P_DEFAULT);
#else
  const htri_t is_hdf5 = H5Fis_hdf5(path.c_str());  // Debian 12 ships 1.10
#endif
  if (is_hdf5 <= 0) {
    return absl::NotFoundError(absl::StrCat(name, ": not an HDF5 file (no HDF5 signature)"));
  }
  layout.file = Handle(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), H5Fclose);
  if (!layout.file.valid()) {
    return absl::NotFoundError(absl::StrCat(name, ": libhdf5 cannot open it"));
  }
  const hid_t file = layout.file.get();
  const bool exchange = PathExists(file, "/exchange/data");
  Hdf5Layout chosen = wanted;
  if (chosen == Hdf5Layout::kAutomatic) {
    chosen = exchange ? Hdf5Layout::kDataExchange : Hdf5Layout::kNxTomo;
  }
  layout.info.layout = chosen;
  if (chosen == Hdf5Layout::kDataExchange) {
    if (!exchange) {
      return absl::NotFoundError(absl::StrCat(
          name, ": no /exchange/data; a Data Exchange file holds its projections there"));
    }
    TOMO_ASSIGN_OR_RETURN(layout.data, OpenDataset(file, "/exchange/data", name, 3));
    if (PathExists(file, "/exchange/data_white")) {
      TOMO_ASSIGN_OR_RETURN(layout.flats, OpenDataset(file, "/exchange/data_white", name, 3));
    }
    if (PathExists(file, "/exchange/data_dark")) {
      TOMO_ASSIGN_OR_RETURN(layout.darks, OpenDataset(file, "/exchange/data_dark", name, 3));
    }
    if (PathExists(file, "/exchange/theta")) {
      TOMO_ASSIGN_OR_RETURN(layout.angles, OpenDataset(file, "/exchange/theta", name, 1));
    }
    layout.info.projections = static_cast<int64_t>(layout.data.dims[0]);
    layout.info.flats = layout.flats ? static_cast<int64_t>(layout.flats->dims[0]) : 0;
    layout.info.darks = layout.darks ? static_cast<int64_t>(layout.darks->dims[0]) : 0;
    layout.info.flat_times = layout.info.flats > 0 ? 1 : 0;
  } else {
    // The first root group that holds instrument/detector/data.
    std::string entry;
    H5G_info_t root;
    if (H5Gget_info(file, &root) >= 0) {
      // NXtomo files hold a handful of entries; a root of thousands is not one.
      const hsize_t links = std::min<hsize_t>(root.nlinks, kMaxHdf5RootLinks);
      for (hsize_t i = 0; i < links && entry.empty(); ++i) {
        char link[256] = {};
        if (H5Lget_name_by_idx(file, "/", H5_INDEX_NAME, H5_ITER_INC, i, link, sizeof(link),
                               H5P_DEFAULT) < 0) {
          continue;
        }
        if (PathExists(file, absl::StrCat("/", link, "/instrument/detector/data"))) {
          entry = absl::StrCat("/", link);
        }
      }
    }
    if (entry.empty()) {
      return absl::NotFoundError(absl::StrCat(
          name, ": neither /exchange/data (Data Exchange) nor <entry>/instrument/detector/data "
                "(NXtomo) found"));
    }
    TOMO_ASSIGN_OR_RETURN(layout.data,
                          OpenDataset(file, absl::StrCat(entry, "/instrument/detector/data"),
                                      name, 3));
    const std::string key_path = absl::StrCat(entry, "/instrument/detector/image_key");
    if (!PathExists(file, key_path)) {
      return absl::NotFoundError(absl::StrCat(
          name, ": no ", key_path, "; NXtomo needs an image key per frame"));
    }
    TOMO_ASSIGN_OR_RETURN(Dataset keys, OpenDataset(file, key_path, name, 1));
    if (keys.dims[0] != layout.data.dims[0]) {
      return absl::InvalidArgumentError(absl::StrCat(name, ": ", key_path, " has ", keys.dims[0],
                                                     " keys, ", layout.data.path, " ",
                                                     layout.data.dims[0], " frames"));
    }
    TOMO_ASSIGN_OR_RETURN(layout.image_keys, ReadVector<int32_t>(keys, H5T_NATIVE_INT32, name));
    int64_t last_flat_position = -1;
    for (int32_t key : layout.image_keys) {
      if (key == kImageKeyFlat && layout.info.projections != last_flat_position) {
        ++layout.info.flat_times;
        last_flat_position = layout.info.projections;
      }
      layout.info.projections += key == kImageKeyProjection;
      layout.info.flats += key == kImageKeyFlat;
      layout.info.darks += key == kImageKeyDark;
    }
    const std::string angle_path = absl::StrCat(entry, "/sample/rotation_angle");
    if (PathExists(file, angle_path)) {
      TOMO_ASSIGN_OR_RETURN(layout.angles, OpenDataset(file, angle_path, name, 1));
    }
  }
  layout.info.projections_dataset = layout.data.path;
  layout.info.rows = static_cast<int64_t>(layout.data.dims[1]);
  layout.info.columns = static_cast<int64_t>(layout.data.dims[2]);
  for (const std::optional<Dataset>* field : {&layout.flats, &layout.darks}) {
    if (field->has_value() && ((*field)->dims[1] != layout.data.dims[1] ||
                               (*field)->dims[2] != layout.data.dims[2])) {
      return absl::InvalidArgumentError(absl::StrCat(
          name, ": ", (*field)->path, " frames are ", (*field)->dims[1], " x ", (*field)->dims[2],
          " (rows x columns), the projections ", layout.info.rows, " x ", layout.info.columns));
    }
  }
  if (layout.angles.has_value()) {
    if (layout.angles->dims[0] != layout.data.dims[0]) {
      return absl::InvalidArgumentError(absl::StrCat(
          name, ": ", layout.angles->path, " has ", layout.angles->dims[0], " angles for ",
          layout.data.dims[0], " frames of ", layout.data.path));
    }
    layout.info.has_angles = true;
  }
  if (layout.info.projections < 1 || layout.info.rows < 1 || layout.info.columns < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        name, ": ", layout.data.path, " holds ", layout.info.projections, " projections of ",
        layout.info.rows, " x ", layout.info.columns, "; at least one is needed"));
  }
  // Flat and dark frames are all held at once: no more of each than there are projections
  // (or kMinReferenceFrameLimit), so that a caller who accepted the projections' size has
  // bounded the whole read.
  const int64_t reference_limit = Hdf5ReferenceFrameLimit(layout.info.projections);
  for (const auto& [count, what] : {std::pair{layout.info.flats, "flat"},
                                    std::pair{layout.info.darks, "dark"}}) {
    if (count > reference_limit) {
      return absl::InvalidArgumentError(absl::StrCat(
          name, ": ", count, " ", what, " frames, above the limit of ", reference_limit,
          " (the larger of ", kMinReferenceFrameLimit, " and the ", layout.info.projections,
          " projections)"));
    }
  }
  return layout;
}

// Frames [first, first + count) of data into out, in blocks of views_per_read.
absl::Status ReadFrameRun(const Dataset& data, int64_t first, int64_t count,
                          int64_t views_per_read, float* out, const std::string& name) {
  const int64_t frame = static_cast<int64_t>(data.dims[1] * data.dims[2]);
  for (int64_t done = 0; done < count; done += views_per_read) {
    const int64_t n = std::min(views_per_read, count - done);
    TOMO_RETURN_IF_ERROR(ReadFrames(data, first + done, n, out + done * frame, name));
  }
  return absl::OkStatus();
}

// Held by every call into libhdf5 made here, and across fork() in ProbeHdf5ScanInChild: no
// thread is then inside libhdf5, so the child finds the library's state consistent.
std::mutex& LibraryMutex() {
  static std::mutex mutex;
  return mutex;
}

// What ReadHdf5Scan reads (every frame of the layout's datasets, one at a time into one
// buffer, and the angles), kept nowhere.
absl::Status ReadEverythingOnce(const std::string& path, Hdf5Layout wanted,
                                const std::string& name) {
  TOMO_ASSIGN_OR_RETURN(Layout layout, OpenLayout(path, wanted, name));
  const int64_t frame = layout.info.rows * layout.info.columns;
  std::vector<float> buffer(static_cast<size_t>(frame));
  for (const Dataset* dataset :
       {&layout.data, layout.flats ? &*layout.flats : nullptr,
        layout.darks ? &*layout.darks : nullptr}) {
    if (dataset == nullptr) continue;
    for (hsize_t f = 0; f < dataset->dims[0]; ++f) {
      TOMO_RETURN_IF_ERROR(
          ReadFrames(*dataset, static_cast<int64_t>(f), 1, buffer.data(), name));
    }
  }
  if (layout.angles.has_value()) return ReadAnglesDeg(*layout.angles, name).status();
  return absl::OkStatus();
}

void WriteAll(int fd, const std::string& bytes) {
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    done += static_cast<size_t>(n);
  }
}

}  // namespace

int64_t Hdf5ReferenceFrameLimit(int64_t projections) {
  return std::max(kMinReferenceFrameLimit, projections);
}

absl::Status ProbeHdf5ScanInChild(const std::string& path, Hdf5Layout layout,
                                  const std::string& name, bool read_frames,
                                  absl::Duration timeout) {
  if (timeout <= absl::ZeroDuration()) {
    struct stat file;
    const int64_t bytes = stat(path.c_str(), &file) == 0 ? static_cast<int64_t>(file.st_size) : 0;
    timeout = absl::Seconds(60) + absl::Seconds(static_cast<double>(bytes) / 32e6);
  }
  const absl::Time deadline = absl::Now() + timeout;
  int pipe_fds[2];
  if (pipe2(pipe_fds, O_CLOEXEC) != 0) {
    return absl::InternalError(absl::StrCat(name, ": pipe: ", std::strerror(errno)));
  }
  pid_t child;
  {
    std::lock_guard<std::mutex> lock(LibraryMutex());
    child = fork();
    if (child == 0) {
      // The child: this thread only, the mutex copied locked (it calls the unlocked code).
      close(pipe_fds[0]);
      const absl::Status s =
          read_frames ? ReadEverythingOnce(path, layout, name) : OpenLayout(path, layout, name).status();
      WriteAll(pipe_fds[1], absl::StrCat(static_cast<int>(s.code()), " ", s.message()));
      _exit(0);
    }
  }
  close(pipe_fds[1]);
  if (child < 0) {
    close(pipe_fds[0]);
    return absl::InternalError(absl::StrCat(name, ": fork: ", std::strerror(errno)));
  }
  std::string reply;
  char chunk[4096];
  bool timed_out = false;
  for (;;) {
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) {
      timed_out = true;
      break;
    }
    pollfd readable = {pipe_fds[0], POLLIN, 0};
    const int ready = poll(&readable, 1,
                           static_cast<int>(std::min<int64_t>(
                               absl::ToInt64Milliseconds(left) + 1, 60 * 1000)));
    if (ready < 0 && errno == EINTR) continue;
    if (ready == 0) continue;  // the deadline is checked above
    if (ready < 0) break;
    const ssize_t n = read(pipe_fds[0], chunk, sizeof(chunk));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    reply.append(chunk, static_cast<size_t>(n));
  }
  close(pipe_fds[0]);
  if (timed_out) kill(child, SIGKILL);
  int status = 0;
  while (waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  if (timed_out) {
    return absl::DeadlineExceededError(absl::StrCat(
        name, ": libhdf5 did not finish reading this file within ",
        absl::FormatDuration(timeout),
        " (in a separate process, now stopped); the file is refused"));
  }
  if (WIFSIGNALED(status)) {
    return absl::InvalidArgumentError(absl::StrCat(
        name, ": libhdf5 crashed reading this file (signal ", WTERMSIG(status), ", ",
        strsignal(WTERMSIG(status)), ", in a separate process); the file is refused"));
  }
  const size_t space = reply.find(' ');
  int code = -1;
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || space == std::string::npos ||
      !absl::SimpleAtoi(reply.substr(0, space), &code) || code < 0 || code > 16) {
    return absl::InvalidArgumentError(absl::StrCat(
        name, ": the process reading this file with libhdf5 failed (status ", status,
        "); the file is refused"));
  }
  return absl::Status(static_cast<absl::StatusCode>(code), reply.substr(space + 1));
}

absl::StatusOr<Hdf5ScanInfo> InspectHdf5Scan(const std::string& path, Hdf5Layout layout,
                                             const std::string& name) {
  std::lock_guard<std::mutex> lock(LibraryMutex());
  TOMO_ASSIGN_OR_RETURN(Layout opened, OpenLayout(path, layout, name));
  return opened.info;
}

absl::StatusOr<Hdf5Scan> ReadHdf5Scan(const std::string& path, Hdf5Layout wanted,
                                      const std::string& name, int64_t views_per_read) {
  std::lock_guard<std::mutex> lock(LibraryMutex());
  TOMO_ASSIGN_OR_RETURN(Layout layout, OpenLayout(path, wanted, name));
  views_per_read = std::max<int64_t>(1, views_per_read);
  Hdf5Scan scan;
  scan.info = layout.info;
  const int64_t rows = layout.info.rows, columns = layout.info.columns;
  // Bounded by OpenLayout: frames <= 2^22, sides <= 2^16, so no product overflows.
  const int64_t frames = layout.info.projections + layout.info.flats + layout.info.darks;
  if (frames > kMaxHdf5Samples / (rows * columns)) {
    return absl::ResourceExhaustedError(absl::StrCat(
        name, ": ", frames, " frames of ", rows, " x ", columns, " samples exceed the limit of ",
        kMaxHdf5Samples, " samples read at once"));
  }
  try {
    scan.projections = Array3D::Uninitialized({layout.info.projections, rows, columns});
    if (layout.info.flats > 0) scan.flat_frames = Array3D({layout.info.flats, rows, columns});
    if (layout.info.darks > 0) scan.dark_frames = Array3D({layout.info.darks, rows, columns});
  } catch (const std::bad_alloc&) {
    return absl::ResourceExhaustedError(absl::StrCat(
        name, ": no memory for ", frames, " frames of ", rows, " x ", columns, " float32"));
  }
  std::vector<double> frame_angles;
  if (layout.angles.has_value()) {
    TOMO_ASSIGN_OR_RETURN(frame_angles, ReadAnglesDeg(*layout.angles, name));
  }
  const int64_t frame = rows * columns;
  if (layout.info.layout == Hdf5Layout::kDataExchange) {
    TOMO_RETURN_IF_ERROR(ReadFrameRun(layout.data, 0, layout.info.projections, views_per_read,
                                      scan.projections.data(), name));
    if (layout.flats) {
      TOMO_RETURN_IF_ERROR(ReadFrameRun(*layout.flats, 0, layout.info.flats, views_per_read,
                                        scan.flat_frames.data(), name));
      scan.flat_positions.assign(static_cast<size_t>(layout.info.flats), 0);
    }
    if (layout.darks) {
      TOMO_RETURN_IF_ERROR(ReadFrameRun(*layout.darks, 0, layout.info.darks, views_per_read,
                                        scan.dark_frames.data(), name));
    }
    scan.angles_deg = std::move(frame_angles);
    return scan;
  }
  // NXtomo: runs of frames with one key, each read into its place.
  const std::vector<int32_t>& keys = layout.image_keys;
  int64_t projections = 0, flats = 0, darks = 0;
  for (size_t start = 0; start < keys.size();) {
    size_t end = start;
    while (end < keys.size() && keys[end] == keys[start]) ++end;
    const int64_t first = static_cast<int64_t>(start), count = static_cast<int64_t>(end - start);
    switch (keys[start]) {
      case kImageKeyProjection:
        TOMO_RETURN_IF_ERROR(ReadFrameRun(layout.data, first, count, views_per_read,
                                          scan.projections.data() + projections * frame, name));
        for (size_t i = start; i < end && !frame_angles.empty(); ++i) {
          scan.angles_deg.push_back(frame_angles[i]);
        }
        projections += count;
        break;
      case kImageKeyFlat:
        TOMO_RETURN_IF_ERROR(ReadFrameRun(layout.data, first, count, views_per_read,
                                          scan.flat_frames.data() + flats * frame, name));
        for (int64_t i = 0; i < count; ++i) scan.flat_positions.push_back(projections);
        flats += count;
        break;
      case kImageKeyDark:
        TOMO_RETURN_IF_ERROR(ReadFrameRun(layout.data, first, count, views_per_read,
                                          scan.dark_frames.data() + darks * frame, name));
        darks += count;
        break;
      default:
        break;  // 3: invalid frames, skipped
    }
    start = end;
  }
  return scan;
}

}  // namespace tomo::core
