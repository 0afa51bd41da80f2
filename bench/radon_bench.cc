// radon-bench: GPU timings of EPR 3D Radon filtered back projection (issue 18's benchmark),
// printed as a table and written as JSON (--json PATH).
//
// Cases: 208 directions of the uniform-solid-angle scheme, objects N^3 for N = 64, 100, 128,
// 150, 200 (1 mm voxels; samples of 1 mm, S = ceil(sqrt(3) N) + 2 of them so that every
// voxel's plane reaches a sample: the volume's corners included). Per case:
//   bp        back projection with the data on the device (CudaRadonProjector::BackWeighted,
//             the FBP's stage 2), random filtered data; the automatic launch shape first,
//             then each voxels-per-thread variant (bp-v1 .. bp-v16). CUDA events around one
//             call; median and minimum of --repeats after a warm-up. G updates/s = N^3 x
//             208 / median.
//   filter    the parabola filter alone on the device (DeviceRowFilter: zero-pad, cuFFT
//             R2C, multiply, C2R, unpad; 208 rows).
//   fp        the forward projector with the data on the device (for iterative methods).
//   e2e       end to end from host arrays: CudaRadonFbp::Run (upload the projections,
//             filter on the device with cuFFT, back project, download the volume,
//             synchronise), host wall clock; the FBP object (plans, buffers, direction
//             table) is made once before timing, as a service keeps it. Pageable host arrays,
//             and again with both arrays page-locked (core::PinHostMemory; "e2e-pinned").
//
// Floors (H100 SXM: 132 SMs at up to 1.98 GHz, 3.35 TB/s HBM3, 50 MB L2, PCIe Gen5 x16
// ~55 GB/s per direction when page-locked):
//   updates: N^3 x 208 = 54.5 M (64), 208 M (100), 436 M (128), 702 M (150), 1.66 G (200).
//   bp bytes: the volume written once, 4 N^3 bytes (8.4 MB at 128^3: 2.5 us of HBM); the
//     projections (208 x S x 4 B < 0.3 MB) stay in L2; each block re-reads the ~50-sample
//     windows it needs (~85 MB of L2 traffic at 128^3, ~15 us). So bp is issue-bound: per
//     update the inner loop issues 7 ALU instructions and one 64-bit shared load, 8 slots
//     of 128 per SM per clock, i.e. 16 updates/clock/SM = 4.2 T updates/s: 0.10 ms at 128^3,
//     0.40 ms at 200^3.
//   e2e: the same plus the volume's download, 8.4 MB (128^3) / 32 MB (200^3): 0.15 / 0.58 ms
//     page-locked at 55 GB/s (pageable memory goes through the driver's staging at about
//     half that), the projections' upload (< 0.3 MB) and the filter (~20 us): a floor of
//     ~0.3 ms at 128^3 and ~1 ms at 200^3 against the aims of 3 and 10 ms.
//
//   build/bin/radon-bench --json radon.json [--repeats 20] [--sizes 128,200]
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "core/base/status_macros.h"
#include "core/data/array3d.h"
#include "core/devices/devices.h"
#include "core/devices/host_pinning.h"
#include "core/filters/ramp_filter.h"
#include "core/geometry/radon_geometry.h"
#include "core/geometry/volume_geometry.h"
#include "core/operators/cuda/cuda_check.h"
#include "core/operators/cuda/cuda_radon_fbp.h"
#include "core/operators/cuda/cuda_radon_projector.h"
#include "core/operators/cuda/cuda_resources.h"
#include "core/phantom/ellipsoid_phantom.h"
#include "core/phantom/ellipsoid_radon.h"

namespace tomo::bench {
namespace {

using core::cuda::CudaRadonFbp;
using core::cuda::DeviceBuffer;

constexpr int64_t kDirections = 208;
// The floors of the file's comment (H100 SXM): the back projector's issue bound and the
// page-locked link speed; each row prints its median over its floor ("x floor").
constexpr double kBackFloorUpdatesPerSecond = 4.2e12;
constexpr double kLinkBytesPerSecond = 55e9;

struct Row {
  std::string name;
  int64_t n = 0, samples = 0;
  double median_s = 0, min_s = 0;
  double gups = 0;     // G voxel-direction updates per second (0 where not an update count)
  double floor_s = 0;  // the row's floor (0 where none is counted)
};

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Times `body` (which enqueues work on `stream`) with CUDA events: one warm-up, then
// `repeats` runs; median and minimum in seconds.
template <typename Body>
absl::StatusOr<std::pair<double, double>> TimeOnDevice(cudaStream_t stream, int repeats,
                                                       Body body) {
  cudaEvent_t start = nullptr, stop = nullptr;
  TOMO_CUDA_RETURN_IF_ERROR(cudaEventCreate(&start));
  TOMO_CUDA_RETURN_IF_ERROR(cudaEventCreate(&stop));
  TOMO_RETURN_IF_ERROR(body());
  TOMO_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
  std::vector<double> times;
  for (int r = 0; r < repeats; ++r) {
    TOMO_CUDA_RETURN_IF_ERROR(cudaEventRecord(start, stream));
    TOMO_RETURN_IF_ERROR(body());
    TOMO_CUDA_RETURN_IF_ERROR(cudaEventRecord(stop, stream));
    TOMO_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(stop));
    float ms = 0;
    TOMO_CUDA_RETURN_IF_ERROR(cudaEventElapsedTime(&ms, start, stop));
    times.push_back(ms * 1e-3);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return std::make_pair(Median(times), *std::min_element(times.begin(), times.end()));
}

absl::Status FillRandom(float* device, int64_t count, std::mt19937_64& random,
                        cudaStream_t stream) {
  std::vector<float> host(static_cast<size_t>(count));
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  for (float& v : host) v = uniform(random);
  TOMO_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(device, host.data(), host.size() * sizeof(float),
                                            cudaMemcpyHostToDevice, stream));
  TOMO_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
  return absl::OkStatus();
}

absl::Status RunCase(int device, int64_t n, int repeats, bool variants, std::vector<Row>& rows) {
  const int64_t samples = static_cast<int64_t>(std::ceil(std::sqrt(3.0) * n)) + 2;
  TOMO_ASSIGN_OR_RETURN(core::RadonGeometry geometry,
                        core::MakeUniformSolidAngleRadon(kDirections, samples, 1.0));
  TOMO_ASSIGN_OR_RETURN(core::VolumeGeometry volume_geometry,
                        core::VolumeGeometry::Create({n, n, n}, {1, 1, 1}, {}));
  const double updates = static_cast<double>(n * n * n) * kDirections;
  std::mt19937_64 random(12345 + n);

  TOMO_ASSIGN_OR_RETURN(std::unique_ptr<CudaRadonFbp> fbp,
                        CudaRadonFbp::Create(device, geometry, volume_geometry, {}));
  TOMO_ASSIGN_OR_RETURN(core::cuda::ScopedDevice scope, core::cuda::ScopedDevice::Enter(device));
  const cudaStream_t s = fbp->stream();
  TOMO_RETURN_IF_ERROR(FillRandom(fbp->device_projections(), kDirections * samples, random, s));

  const double back_floor_s = updates / kBackFloorUpdatesPerSecond;
  const double e2e_floor_s =
      back_floor_s +
      4.0 * static_cast<double>(n * n * n + kDirections * samples) / kLinkBytesPerSecond;
  auto add = [&](const std::string& name, std::pair<double, double> t, bool count_updates,
                 double floor_s) {
    rows.push_back({name, n, samples, t.first, t.second,
                    count_updates ? updates / t.first * 1e-9 : 0, floor_s});
    std::printf("%-12s %4ld^3  S %4ld  median %9.4f ms  min %9.4f ms  %8.1f G updates/s",
                name.c_str(), static_cast<long>(n), static_cast<long>(samples), t.first * 1e3,
                t.second * 1e3, rows.back().gups);
    if (floor_s > 0) std::printf("  %5.2f x floor", t.first / floor_s);
    std::printf("\n");
    std::fflush(stdout);
  };

  core::cuda::CudaRadonProjector& projector = fbp->projector();
  std::vector<int> shapes = {0};
  if (variants) shapes.insert(shapes.end(), {1, 2, 4, 8, 16});
  for (int shape : shapes) {
    projector.set_back_voxels_per_thread(shape);
    TOMO_ASSIGN_OR_RETURN(auto t, TimeOnDevice(s, repeats, [&] {
                            return projector.BackWeighted(fbp->device_projections(),
                                                          fbp->device_volume());
                          }));
    add(shape == 0 ? "bp" : absl::StrCat("bp-v", shape), t, true, back_floor_s);
  }
  projector.set_back_voxels_per_thread(0);

  // The filter alone, on a copy so that the data stay the same from run to run.
  TOMO_ASSIGN_OR_RETURN(core::RampFilter filter,
                        core::RampFilter::Create({}, samples, 1.0, core::FilterOrder::kParabola));
  TOMO_ASSIGN_OR_RETURN(core::cuda::DeviceRowFilter row_filter,
                        core::cuda::DeviceRowFilter::Create(filter, kDirections, 1, {}, s));
  TOMO_ASSIGN_OR_RETURN(auto filtered, DeviceBuffer<float>::Allocate(kDirections * samples, s));
  TOMO_ASSIGN_OR_RETURN(auto tf, TimeOnDevice(s, repeats, [&] {
                          return row_filter.Apply(fbp->device_projections(), filtered.get());
                        }));
  add("filter", tf, false, 0);

  TOMO_RETURN_IF_ERROR(FillRandom(fbp->device_volume(), n * n * n, random, s));
  TOMO_ASSIGN_OR_RETURN(auto tfp, TimeOnDevice(s, repeats, [&] {
                          return projector.Forward(fbp->device_volume(), filtered.get());
                        }));
  add("fp", tfp, true, 0);

  // End to end from host arrays: the head phantom's exact plane integrals in, a volume out.
  const core::Array3D projections = core::EllipsoidRadonTransform(
      core::EllipsoidPhantom::SheppLogan3D(0.45 * static_cast<double>(n)), geometry, 1);
  core::Array3D volume(volume_geometry.dims());
  for (bool pinned : {false, true}) {
    std::unique_ptr<core::PinnedHostRegion> pin_in, pin_out;
    if (pinned) {
      TOMO_ASSIGN_OR_RETURN(pin_in,
                            core::PinHostMemory(projections.data(), projections.size_bytes()));
      TOMO_ASSIGN_OR_RETURN(pin_out, core::PinHostMemory(volume.data(), volume.size_bytes()));
      if (!pin_in->pinned() || !pin_out->pinned()) {
        std::printf("e2e-pinned: not pinned (%s%s)\n", pin_in->why_not().c_str(),
                    pin_out->why_not().c_str());
        continue;
      }
    }
    TOMO_RETURN_IF_ERROR(fbp->Run(projections, volume));  // warm-up
    std::vector<double> times;
    for (int r = 0; r < repeats; ++r) {
      const auto start = std::chrono::steady_clock::now();
      TOMO_RETURN_IF_ERROR(fbp->Run(projections, volume));
      times.push_back(
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    }
    add(pinned ? "e2e-pinned" : "e2e",
        {Median(times), *std::min_element(times.begin(), times.end())}, true, e2e_floor_s);
  }
  return absl::OkStatus();
}

std::string Json(const std::vector<Row>& rows, const std::string& device) {
  std::string out = absl::StrCat("{\n  \"device\": \"", device,
                                 "\",\n  \"directions\": ", kDirections, ",\n  \"results\": [\n");
  for (size_t i = 0; i < rows.size(); ++i) {
    const Row& r = rows[i];
    absl::StrAppend(&out, "    {\"case\": \"", r.name, "\", \"volume\": ", r.n,
                    ", \"samples\": ", r.samples, ", \"median_s\": ", r.median_s,
                    ", \"min_s\": ", r.min_s, ", \"gups\": ", r.gups, ", \"floor_s\": ", r.floor_s,
                    "}", i + 1 < rows.size() ? ",\n" : "\n");
  }
  absl::StrAppend(&out, "  ]\n}\n");
  return out;
}

int Main(int argc, char** argv) {
  CLI::App app{"radon-bench: EPR 3D Radon FBP timings on a CUDA device"};
  std::string json_path;
  int repeats = 20;
  int device = 0;
  bool variants = true;
  std::vector<int64_t> sizes = {64, 100, 128, 150, 200};
  app.add_option("--json", json_path, "write the results as JSON to this path");
  app.add_option("--repeats", repeats, "timed runs per row (median reported)")
      ->check(CLI::Range(1, 10000));
  app.add_option("--device", device, "CUDA device ordinal");
  app.add_option("--sizes", sizes, "object sides N (N^3 voxels)")
      ->delimiter(',')
      ->check(CLI::Range(int64_t{8}, int64_t{1024}));
  app.add_flag("--variants,!--no-variants", variants,
               "also time every voxels-per-thread shape of the back projector");
  CLI11_PARSE(app, argc, argv);

  const std::vector<core::DeviceInfo> devices = core::ListCudaDevices();
  if (devices.empty()) {
    std::fprintf(stderr, "radon-bench: no CUDA device\n");
    return 1;
  }
  std::string device_name = "cuda";
  for (const core::DeviceInfo& d : devices) {
    if (d.index == device) device_name = d.name;
  }
  std::printf("device %d: %s, %ld directions (uniform solid angle)\n", device, device_name.c_str(),
              static_cast<long>(kDirections));
  std::vector<Row> rows;
  for (int64_t n : sizes) {
    const absl::Status status = RunCase(device, n, repeats, variants, rows);
    if (!status.ok()) {
      std::fprintf(stderr, "radon-bench: %ld^3: %s\n", static_cast<long>(n),
                   status.ToString().c_str());
      return 1;
    }
  }
  if (!json_path.empty()) {
    std::ofstream(json_path) << Json(rows, device_name);
  }
  return 0;
}

}  // namespace
}  // namespace tomo::bench

int main(int argc, char** argv) { return tomo::bench::Main(argc, argv); }
