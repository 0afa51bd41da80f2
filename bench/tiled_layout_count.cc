// tiled-layout-count: the counts of the tiled layout (core/system_matrix/tiled_runs.h) for
// system-matrix-bench's scan (720 views x 1024 columns, the grid n x n over 256 mm), on the
// CPU, before any GPU timing: per tile side, the stored entries, the slots (padding
// included), lanes and warps, steps per warp, shared-memory wavefronts per step, thread
// blocks per launch, bytes against CSR, and per ART block (one stored view) the work the
// two kernels do: entries, slots, shared-memory accesses, global atomics, matrix bytes; and
// the seconds the host takes to build the layout (all threads) and to hand it out again
// (the matrix keeps it: SymmetricSystemMatrix::TiledLayout); and the kernels' tasks
// (tiled_tasks.h): the forward's thread blocks and atomics, the transpose's threads and
// waves; the one-launch forward's global atomics and the 128-byte lines they touch; and, for
// the one-launch sweep's shapes, the steps of the most loaded warp per ART block in its
// forward and its transpose.
//
//   build/bin/tiled-layout-count --sizes 512,1024 --tile-sides 8,16,32
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/str_split.h"
#include "core/geometry/geometry_builders.h"
#include "core/system_matrix/cuda/tiled_back_threads.h"
#include "core/system_matrix/cuda/tiled_sweep_owners.h"
#include "core/system_matrix/matrix_memory.h"
#include "core/system_matrix/stored_matrix.h"
#include "core/system_matrix/symmetric_system_matrix.h"
#include "core/system_matrix/tiled_runs.h"

namespace {

using namespace tomo::core;
using namespace tomo::core::system_matrix;

// As system_matrix_bench.cc.
constexpr double kFieldMm = 256;
constexpr double kSourceOriginMm = 570;
constexpr double kOriginDetectorMm = 470;
constexpr double kColumnSpacingMm = 0.69;

int Count(int64_t n, const std::vector<int>& sides) {
  FanConeOptions fan;
  fan.detector = {1, 1024, 1.0, kColumnSpacingMm, 0, 0};
  fan.source_origin_mm = kSourceOriginMm;
  fan.origin_detector_mm = kOriginDetectorMm;
  fan.angles_rad = UniformAnglesRad(720, M_PI / 720.0, 2 * M_PI);
  const VectorGeometry geometry = MakeFan2D(fan).value();
  const double pixel = kFieldMm / static_cast<double>(n);
  const VolumeGeometry volume =
      VolumeGeometry::Create({n, n, 1}, {pixel, pixel, pixel}, {}).value();
  const FanScan scan = FanScan::Create(geometry, volume).value();
  const MatrixBytes need = EstimateMatrixBytes(geometry, volume, MatrixFormat::kAutomatic).value();
  const SymmetricSystemMatrix a = SymmetricSystemMatrix::Build(scan).value();
  const double views = static_cast<double>(a.num_blocks());
  std::printf(
      "n %ld: stored entries %ld (%.2f M per stored view), CSR %.3f GB, runs format %.3f GB\n",
      static_cast<long>(n), static_cast<long>(a.stored_nonzeros()),
      a.stored_nonzeros() / views / 1e6, need.csr_bytes / 1e9, a.bytes() / 1e9);
  for (const int side : sides) {
    const auto start = std::chrono::steady_clock::now();
    const absl::StatusOr<std::shared_ptr<const TiledRuns>> built = a.TiledLayout(side);
    const auto first = std::chrono::steady_clock::now();
    if (!built.ok()) {
      std::printf("  side %d: %s\n", side, std::string(built.status().message()).c_str());
      continue;
    }
    const std::shared_ptr<const TiledRuns> again = a.TiledLayout(side).value();
    const auto second = std::chrono::steady_clock::now();
    const TiledRuns& t = **built;
    std::printf("  side %d: layout built in %.2f s, handed out again in %.6f s (%s)\n", side,
                std::chrono::duration<double>(first - start).count(),
                std::chrono::duration<double>(second - first).count(),
                again == *built ? "the same object" : "another object");
    // What tomod's admission counts for a TILED job, without the matrix or the layout.
    const auto count_start = std::chrono::steady_clock::now();
    const absl::StatusOr<uint64_t> counted = TiledRuns::CountBytes(scan, side);
    std::printf("    admission's count: %s in %.2f s (%s the layout's %llu bytes)\n",
                counted.ok() ? std::to_string(*counted).c_str()
                             : std::string(counted.status().message()).c_str(),
                std::chrono::duration<double>(std::chrono::steady_clock::now() - count_start).count(),
                counted.ok() && *counted == (*built)->bytes() ? "equal to" : "NOT equal to",
                static_cast<unsigned long long>((*built)->bytes()));
    const double slots = static_cast<double>(t.slots());
    const double steps = slots / 32;
    const double warps = static_cast<double>(t.warps().size());
    const double segments = static_cast<double>(t.ray_segments());
    int64_t most_warps = 0;  // of one orbit of one stored view: the thread block's warps
    for (size_t o = 0; o + 1 < t.orbit_warp_begin().size(); ++o) {
      most_warps = std::max(most_warps, t.orbit_warp_begin()[o + 1] - t.orbit_warp_begin()[o]);
    }
    std::printf(
        "  side %d (%ld tiles a side, %ld orbits = the transpose's thread blocks): slots %.1f M, "
        "padding %.1f %%, %.3f GB = %.2fx under CSR\n"
        "    per stored view: %.0f warps (%.1f per orbit, at most %ld), %.1f steps per warp, "
        "(lane, ray) "
        "segments %.0f (%.2f per lane)\n"
        "    wavefronts per step: gather %.2f, atomic add %.2f\n"
        "    per ART block: entries %.2f M, slots %.2f M, matrix bytes %.2f MB; forward: shared "
        "loads %.1f M; transpose: shared atomics %.1f M\n",
        side, static_cast<long>(t.tiles_per_axis()), static_cast<long>(t.orbits_per_view()),
        slots / 1e6, 100.0 * (slots - t.entries()) / slots, t.bytes() / 1e9,
        static_cast<double>(need.csr_bytes) / t.bytes(), warps / views,
        warps / views / t.orbits_per_view(), static_cast<long>(most_warps), steps / warps,
        segments / views, segments / (32 * warps), t.gather_wavefronts() / steps,
        t.atomic_wavefronts() / steps, t.entries() / views / 1e6, slots / views / 1e6,
        (slots * 6 + 32 * warps * 6 + warps * 16) / views / 1e6, 8 * slots / views / 1e6,
        8 * slots / views / 1e6);
    // The kernels' tasks (tiled_tasks.h): the forward's launched and working thread blocks,
    // its 4-float global atomics (two per lane and ray present in a task), and the
    // transpose's threads and waves on 132 multiprocessors of 1024 threads (an H100's).
    const TiledTasks& tasks = t.tasks();
    int64_t launched = 0, working = 0, float4_atomics = 0;
    for (int64_t v = 0; v < a.num_blocks(); ++v) {
      launched += int64_t{tasks.forward_parts(v)} * t.orbits_per_view();
      for (int64_t o = 0; o < t.orbits_per_view(); ++o) {
        const size_t at = static_cast<size_t>(v * t.orbits_per_view() + o);
        const int64_t count = tasks.orbit_task_begin()[at + 1] - tasks.orbit_task_begin()[at];
        working += (count + kTiledForwardTasks - 1) / kTiledForwardTasks;
        for (int64_t i = tasks.orbit_task_begin()[at]; i < tasks.orbit_task_begin()[at + 1]; ++i) {
          const TiledTask& task = tasks.tasks()[static_cast<size_t>(i)];
          const int64_t w = t.orbit_warp_begin()[at] + task.warp_offset;
          const int64_t first_step = int64_t{task.chunk} * kTiledTaskSteps;
          const int64_t warp_steps = t.warps()[static_cast<size_t>(w)].steps;
          for (int l = 0; l < 32; ++l) {
            const uint32_t rays = t.lane_rays()[static_cast<size_t>(32 * w + l)];
            const int64_t change = t.lane_switch()[static_cast<size_t>(32 * w + l)];
            if ((rays & 0xffffu) != kTiledNoRay && first_step < change) float4_atomics += 2;
            if ((rays >> 16) != kTiledNoRay && first_step + kTiledTaskSteps > change &&
                change < warp_steps) {
              float4_atomics += 2;
            }
          }
        }
      }
    }
    const int back_threads =
        cuda::TiledBackThreads(t.orbits_per_view(), tasks.most_tasks_per_orbit(), 132, 1024);
    const int64_t blocks_per_sm = std::max<int64_t>(1, 1024 / back_threads);
    std::printf(
        "    tasks: %.0f per stored view (%.2f steps each), %ld at most per orbit; forward: "
        "%.0f thread blocks launched per ART block, %.0f with tasks, 4-float global atomics "
        "%.0f k; transpose: %d threads per block, %.2f waves on 132 multiprocessors\n",
        static_cast<double>(tasks.tasks().size()) / views,
        steps / static_cast<double>(tasks.tasks().size()),
        static_cast<long>(tasks.most_tasks_per_orbit()), launched / views, working / views,
        float4_atomics / views / 1e3, back_threads,
        static_cast<double>(t.orbits_per_view()) / (132.0 * blocks_per_sm));
    // The one-launch sweep's forward (ForwardWarp): per layout warp, two 4-float atomic
    // instructions (planes 0-3, planes 4-7) for its lanes' first rays and two for their
    // second rays, and the 128-byte lines each instruction touches, which their cost follows
    // (bench/NOTES.md): the sums by lines (8 rays to a line, SumsRayIndex) against the 8
    // planes of a ray side by side (4 rays to a line).
    int64_t lane_atomics = 0, lines_by_lines = 0, lines_side_by_side = 0;
    for (size_t w = 0; w < t.warps().size(); ++w) {
      const int64_t g = t.warps()[w].map, warp_steps = t.warps()[w].steps;
      std::set<int64_t> by_lines[2], side_by_side[2];  // [first rays, second rays]
      for (int l = 0; l < 32; ++l) {
        const uint32_t rays = t.lane_rays()[32 * w + static_cast<size_t>(l)];
        const int64_t change = t.lane_switch()[32 * w + static_cast<size_t>(l)];
        const uint32_t ray[2] = {rays & 0xffffu, rays >> 16};
        const bool present[2] = {change > 0, change < warp_steps};
        for (int k = 0; k < 2; ++k) {
          if (ray[k] == kTiledNoRay || !present[k]) continue;
          lane_atomics += 2;
          by_lines[k].insert(ray[k] / 8);
          side_by_side[k].insert((g * t.columns() + ray[k]) / 4);
        }
      }
      for (int k = 0; k < 2; ++k) {
        lines_by_lines += 2 * static_cast<int64_t>(by_lines[k].size());
        lines_side_by_side += 2 * static_cast<int64_t>(side_by_side[k].size());
      }
    }
    std::printf(
        "    one-launch forward per ART block: %.0f k 4-float atomics; lines its warp "
        "instructions touch: %.0f k (sums by lines), %.0f k (a ray's 8 planes side by side)\n",
        lane_atomics / views / 1e3, lines_by_lines / views / 1e3, lines_side_by_side / views / 1e3);
    // The one-launch sweep's owners on 132 thread blocks (tiled_sweep_owners.h): tasks on
    // its critical path per ART block (the most loaded thread block's), against the even
    // share.
    const int sweep_blocks = static_cast<int>(std::min<int64_t>(132, t.orbits_per_view()));
    const cuda::TiledSweepOwners owners =
        cuda::AssignTiledSweepOwners(tasks.orbit_task_begin(), t.orbits_per_view(), sweep_blocks);
    double even = 0;
    for (int64_t v = 0; v < a.num_blocks(); ++v) {
      const size_t first = static_cast<size_t>(v * t.orbits_per_view());
      const int64_t view_tasks = tasks.orbit_task_begin()[first + static_cast<size_t>(t.orbits_per_view())] -
                                 tasks.orbit_task_begin()[first];
      even += std::ceil(static_cast<double>(view_tasks) / sweep_blocks);
    }
    std::printf(
        "    sweep on %d thread blocks: at most %d orbits each, %.1f tasks per ART block on the "
        "critical path (an even share: %.1f)\n",
        sweep_blocks, owners.most_orbits, static_cast<double>(owners.critical_tasks) / views,
        even / views);
    // Per ART block, the steps of the forward's and the transpose's most loaded warp, as
    // the sweep deals them: layout warps (forward) and tasks (transpose) of the thread
    // block's orbits, in turn to its warps; and what dealing them longest first to the
    // least loaded warp would leave, and an even share. The sweep's 768 threads per
    // multiprocessor as one thread block or two (the product's shapes), and 1024 threads.
    const std::pair<int, int> sweep_shapes[] = {{132, 24}, {264, 12}, {264, 16}, {132, 32}};
    for (const auto& [blocks_of_sweep, warps_per_block] : sweep_shapes) {
      const cuda::TiledSweepOwners own = cuda::AssignTiledSweepOwners(
          tasks.orbit_task_begin(), t.orbits_per_view(), blocks_of_sweep);
      double fw_turn = 0, fw_lpt = 0, fw_even = 0, fw_mean = 0, bk_turn = 0, bk_mean = 0;
      const auto deal = [&](std::vector<int64_t> items, bool longest_first) {
        if (longest_first) std::sort(items.rbegin(), items.rend());
        std::vector<int64_t> load(static_cast<size_t>(warps_per_block), 0);
        for (size_t i = 0; i < items.size(); ++i) {
          if (longest_first) {
            *std::min_element(load.begin(), load.end()) += items[i];
          } else {
            load[i % load.size()] += items[i];
          }
        }
        return *std::max_element(load.begin(), load.end());
      };
      for (int64_t v = 0; v < a.num_blocks(); ++v) {
        int64_t most_turn = 0, most_lpt = 0, most_back = 0, total = 0;
        double sum_turn = 0, sum_back = 0;
        for (int b = 0; b < blocks_of_sweep; ++b) {
          std::vector<int64_t> warp_steps, task_steps;
          for (int i = own.begin[b]; i < own.begin[b + 1]; ++i) {
            const size_t at = static_cast<size_t>(v * t.orbits_per_view() + own.orbits[i]);
            for (int64_t w = t.orbit_warp_begin()[at]; w < t.orbit_warp_begin()[at + 1]; ++w) {
              warp_steps.push_back(t.warps()[static_cast<size_t>(w)].steps);
              total += warp_steps.back();
            }
            for (int64_t k = tasks.orbit_task_begin()[at]; k < tasks.orbit_task_begin()[at + 1];
                 ++k) {
              const TiledTask& task = tasks.tasks()[static_cast<size_t>(k)];
              const int64_t steps_of_warp =
                  t.warps()[static_cast<size_t>(t.orbit_warp_begin()[at] + task.warp_offset)].steps;
              task_steps.push_back(std::min<int64_t>(
                  kTiledTaskSteps, steps_of_warp - int64_t{task.chunk} * kTiledTaskSteps));
            }
          }
          const int64_t turn = deal(warp_steps, false), back = deal(task_steps, false);
          most_turn = std::max(most_turn, turn);
          most_lpt = std::max(most_lpt, deal(warp_steps, true));
          most_back = std::max(most_back, back);
          sum_turn += static_cast<double>(turn);
          sum_back += static_cast<double>(back);
        }
        fw_turn += static_cast<double>(most_turn);
        fw_lpt += static_cast<double>(most_lpt);
        fw_mean += sum_turn / blocks_of_sweep;
        fw_even += static_cast<double>(total) / (blocks_of_sweep * warps_per_block);
        bk_turn += static_cast<double>(most_back);
        bk_mean += sum_back / blocks_of_sweep;
      }
      std::printf(
          "    sweep on %d x %d warps, steps of the most loaded warp per ART block: forward "
          "%.1f (thread blocks' mean %.1f; longest first %.1f; even %.1f), transpose %.1f "
          "(mean %.1f)\n",
          blocks_of_sweep, warps_per_block, fw_turn / views, fw_mean / views, fw_lpt / views,
          fw_even / views, bk_turn / views, bk_mean / views);
    }
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"tiled-layout-count: counts of the tiled layout for system-matrix-bench's scan"};
  std::string sizes = "512,1024";
  std::string sides = "8,16,32";
  app.add_option("--sizes", sizes, "comma-separated grid sides");
  app.add_option("--tile-sides", sides, "comma-separated tile sides");
  CLI11_PARSE(app, argc, argv);
  std::vector<int> side_list;
  for (const absl::string_view s : absl::StrSplit(sides, ','))
    side_list.push_back(std::stoi(std::string(s)));
  for (const absl::string_view s : absl::StrSplit(sizes, ',')) {
    if (Count(std::stoll(std::string(s)), side_list) != 0) return 1;
  }
  return 0;
}
