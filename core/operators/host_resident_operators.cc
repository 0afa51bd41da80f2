#include "core/operators/host_resident_operators.h"

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/base/parallel_for.h"
#include "core/base/status_macros.h"
#include "core/data/dims_check.h"

namespace tomo::core {

absl::Status CheckResidentOperands(const char* operation, const void* owner,
                                   const ResidentArray& a, const ResidentArray& b) {
  if (a.owner() != owner || b.owner() != owner) {
    return absl::InvalidArgumentError(absl::StrCat(
        operation, ": an array was allocated by another ResidentOperators"));
  }
  if (a.size() != b.size()) {
    return absl::InvalidArgumentError(absl::StrCat(operation, ": arrays of ", a.size(),
                                                   " and ", b.size(), " elements (dims ",
                                                   DimsText(a.dims()), " and ",
                                                   DimsText(b.dims()), ")"));
  }
  return absl::OkStatus();
}

namespace {

// Elements per work item of the element-wise loops and of Dot's partial sums: Dot's
// partials are fixed by the size, not the thread count, so its result is too.
constexpr int64_t kChunk = int64_t{1} << 16;

class HostArray final : public ResidentArray {
 public:
  HostArray(Dims3 dims, const void* owner)
      : ResidentArray(dims, owner), array(Array3D::Uninitialized(dims)) {}
  Array3D array;
};

HostArray& Host(ResidentArray& a) { return static_cast<HostArray&>(a); }
const HostArray& Host(const ResidentArray& a) { return static_cast<const HostArray&>(a); }

absl::Status CheckOwned(const char* operation, const void* owner, const ResidentArray& a) {
  return CheckResidentOperands(operation, owner, a, a);
}

// body(begin, end) for each chunk of kChunk elements of [0, count), on the threads.
template <typename Body>
void ForChunks(int64_t count, int threads, const Body& body) {
  const int64_t chunks = (count + kChunk - 1) / kChunk;
  ParallelFor(
      chunks,
      [&](int64_t c0, int64_t c1) {
        for (int64_t c = c0; c < c1; ++c) body(c * kChunk, std::min(count, (c + 1) * kChunk));
      },
      threads);
}

// The backend's host-array Projector on HostArrays.
class HostProjector final : public ResidentProjector {
 public:
  HostProjector(std::unique_ptr<Projector> projector, const void* owner)
      : projector_(std::move(projector)), owner_(owner) {}

  absl::Status Forward(const ResidentArray& volume, ResidentArray& projections) override {
    TOMO_RETURN_IF_ERROR(CheckOwned("Forward", owner_, volume));
    TOMO_RETURN_IF_ERROR(CheckOwned("Forward", owner_, projections));
    return projector_->Forward(Host(volume).array, Host(projections).array);
  }
  absl::Status Back(const ResidentArray& projections, ResidentArray& volume) override {
    TOMO_RETURN_IF_ERROR(CheckOwned("Back", owner_, volume));
    TOMO_RETURN_IF_ERROR(CheckOwned("Back", owner_, projections));
    return projector_->Back(Host(projections).array, Host(volume).array);
  }

 private:
  std::unique_ptr<Projector> projector_;
  const void* owner_;
};

}  // namespace

HostResidentOperators::HostResidentOperators(Backend& backend, int threads)
    : backend_(backend), threads_(threads > 0 ? threads : DefaultThreadCount()) {}

absl::StatusOr<std::unique_ptr<ResidentArray>> HostResidentOperators::Allocate(
    Dims3 dims, ResidentRole /*role*/) {
  if (dims.d0 < 0 || dims.d1 < 0 || dims.d2 < 0) {
    return absl::InvalidArgumentError(absl::StrCat("Allocate: dims ", DimsText(dims)));
  }
  return std::unique_ptr<ResidentArray>(std::make_unique<HostArray>(dims, this));
}

absl::Status HostResidentOperators::Upload(const Array3D& host, ResidentArray& device) {
  TOMO_RETURN_IF_ERROR(CheckOwned("Upload", this, device));
  TOMO_RETURN_IF_ERROR(CheckDimsMatch("Upload: host array", host.dims(), device.dims(),
                                      "(the resident array's)"));
  ParallelCopy(host.data(), host.size(), Host(device).array.data());
  return absl::OkStatus();
}

absl::Status HostResidentOperators::Download(const ResidentArray& device, Array3D& host) {
  TOMO_RETURN_IF_ERROR(CheckOwned("Download", this, device));
  TOMO_RETURN_IF_ERROR(CheckDimsMatch("Download: host array", host.dims(), device.dims(),
                                      "(the resident array's)"));
  ParallelCopy(Host(device).array.data(), host.size(), host.data());
  return absl::OkStatus();
}

absl::Status HostResidentOperators::CopyFromPeer(ResidentOperators& source_ops,
                                                 const ResidentArray& source,
                                                 ResidentArray& target) {
  if (dynamic_cast<HostResidentOperators*>(&source_ops) == nullptr) {
    return ResidentOperators::CopyFromPeer(source_ops, source, target);
  }
  TOMO_RETURN_IF_ERROR(CheckOwned("CopyFromPeer", &source_ops, source));
  TOMO_RETURN_IF_ERROR(CheckOwned("CopyFromPeer", this, target));
  TOMO_RETURN_IF_ERROR(CheckDimsMatch("CopyFromPeer: target", target.dims(), source.dims(),
                                      "(the source's)"));
  ParallelCopy(Host(source).array.data(), source.size(), Host(target).array.data());
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<ResidentProjector>> HostResidentOperators::MakeProjector(
    const Geometry& geometry, const VolumeGeometry& volume_geometry, ProjectorModel model) {
  TOMO_ASSIGN_OR_RETURN(std::unique_ptr<Projector> projector,
                        backend_.MakeProjector(geometry, volume_geometry, model));
  return std::unique_ptr<ResidentProjector>(
      std::make_unique<HostProjector>(std::move(projector), this));
}

absl::Status HostResidentOperators::Fill(float value, ResidentArray& x) {
  TOMO_RETURN_IF_ERROR(CheckOwned("Fill", this, x));
  ParallelFill(Host(x).array.data(), x.size(), value);
  return absl::OkStatus();
}

absl::Status HostResidentOperators::Axpby(float a, const ResidentArray& x, float b,
                                          ResidentArray& y) {
  TOMO_RETURN_IF_ERROR(CheckResidentOperands("Axpby", this, x, y));
  const float* xs = Host(x).array.data();
  float* ys = Host(y).array.data();
  ForChunks(y.size(), threads_, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) ys[i] = a * xs[i] + b * ys[i];
  });
  return absl::OkStatus();
}

absl::Status HostResidentOperators::Multiply(const ResidentArray& w, ResidentArray& y) {
  TOMO_RETURN_IF_ERROR(CheckResidentOperands("Multiply", this, w, y));
  const float* ws = Host(w).array.data();
  float* ys = Host(y).array.data();
  ForChunks(y.size(), threads_, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) ys[i] = ws[i] * ys[i];
  });
  return absl::OkStatus();
}

absl::Status HostResidentOperators::AddScaledQuotient(float a, const ResidentArray& d,
                                                      const ResidentArray& s, float epsilon,
                                                      float lower, float upper,
                                                      ResidentArray& x) {
  TOMO_RETURN_IF_ERROR(CheckResidentOperands("AddScaledQuotient", this, d, x));
  TOMO_RETURN_IF_ERROR(CheckResidentOperands("AddScaledQuotient", this, s, x));
  if (!(lower <= upper)) {
    return absl::InvalidArgumentError(
        absl::StrCat("AddScaledQuotient: lower bound ", lower, " above upper bound ", upper));
  }
  const float* ds = Host(d).array.data();
  const float* ss = Host(s).array.data();
  float* xs = Host(x).array.data();
  ForChunks(x.size(), threads_, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      const float step = ss[i] > epsilon ? a * ds[i] / ss[i] : 0.0f;
      xs[i] = std::min(std::max(xs[i] + step, lower), upper);
    }
  });
  return absl::OkStatus();
}

absl::Status HostResidentOperators::InvertGuarded(float epsilon, ResidentArray& x) {
  TOMO_RETURN_IF_ERROR(CheckOwned("InvertGuarded", this, x));
  float* xs = Host(x).array.data();
  ForChunks(x.size(), threads_, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) xs[i] = xs[i] > epsilon ? 1.0f / xs[i] : 0.0f;
  });
  return absl::OkStatus();
}

absl::Status HostResidentOperators::Clamp(float lower, float upper, ResidentArray& x) {
  TOMO_RETURN_IF_ERROR(CheckOwned("Clamp", this, x));
  if (!(lower <= upper)) {
    return absl::InvalidArgumentError(
        absl::StrCat("Clamp: lower bound ", lower, " above upper bound ", upper));
  }
  float* xs = Host(x).array.data();
  ForChunks(x.size(), threads_, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) xs[i] = std::min(std::max(xs[i], lower), upper);
  });
  return absl::OkStatus();
}

absl::StatusOr<double> HostResidentOperators::Dot(const ResidentArray& a,
                                                  const ResidentArray& b) {
  TOMO_RETURN_IF_ERROR(CheckResidentOperands("Dot", this, a, b));
  const float* as = Host(a).array.data();
  const float* bs = Host(b).array.data();
  const int64_t count = a.size();
  std::vector<double> partial(static_cast<size_t>((count + kChunk - 1) / kChunk), 0.0);
  ForChunks(count, threads_, [&](int64_t i0, int64_t i1) {
    double sum = 0;
    for (int64_t i = i0; i < i1; ++i) sum += static_cast<double>(as[i]) * bs[i];
    partial[static_cast<size_t>(i0 / kChunk)] = sum;
  });
  double total = 0;
  for (double p : partial) total += p;
  return total;
}

absl::Status HostResidentOperators::AccumulateDot(const ResidentArray& a,
                                                  const ResidentArray& b) {
  TOMO_ASSIGN_OR_RETURN(const double dot, Dot(a, b));
  accumulated_dot_ += dot;
  return absl::OkStatus();
}

absl::StatusOr<double> HostResidentOperators::TakeAccumulatedDot() {
  const double total = accumulated_dot_;
  accumulated_dot_ = 0;
  return total;
}

}  // namespace tomo::core
