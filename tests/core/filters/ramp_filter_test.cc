#include "core/filters/ramp_filter.h"

#include <cmath>
#include <limits>
#include <vector>

#include "core/operators/cpu/cpu_backend.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tomo::core {
namespace {

using ::testing::HasSubstr;

constexpr FilterWindow kAllWindows[] = {FilterWindow::kRamLak, FilterWindow::kSheppLogan,
                                        FilterWindow::kCosine, FilterWindow::kHamming,
                                        FilterWindow::kHann};

// The spatial band-limited parabola f^2, h(n d) (ramp_filter.h).
double SpatialParabola(int64_t n, double d) {
  if (n == 0) return 1.0 / (12 * d * d * d);
  return (n % 2 == 0 ? 1.0 : -1.0) / (2 * M_PI * M_PI * static_cast<double>(n * n) * d * d * d);
}

// The spatial band-limited ramp of Kak & Slaney, h(n d).
double SpatialRamp(int64_t n, double d) {
  if (n == 0) return 1.0 / (4 * d * d);
  if (n % 2 == 0) return 0.0;
  return -1.0 / ((n * M_PI * d) * (n * M_PI * d));
}

TEST(RampFilterTest, WindowsMatchTheirClosedForms) {
  for (double cutoff : {1.0, 0.8, 0.5, 0.3}) {
    const double fc = 0.5 * cutoff;
    for (double f : {0.0, 0.03, 0.1, 0.149, 0.2, 0.25, 0.33, 0.4, 0.5}) {
      SCOPED_TRACE(::testing::Message() << "f " << f << ", cutoff " << cutoff);
      const bool passes = f <= fc;
      const double x = M_PI * f / (2 * fc);
      EXPECT_EQ(RampFilter::Window(FilterWindow::kRamLak, f, cutoff), passes ? 1.0 : 0.0);
      EXPECT_NEAR(RampFilter::Window(FilterWindow::kSheppLogan, f, cutoff),
                  passes ? (f == 0 ? 1.0 : std::sin(x) / x) : 0.0, 1e-15);
      EXPECT_NEAR(RampFilter::Window(FilterWindow::kCosine, f, cutoff), passes ? std::cos(x) : 0.0,
                  1e-15);
      EXPECT_NEAR(RampFilter::Window(FilterWindow::kHamming, f, cutoff),
                  passes ? 0.54 + 0.46 * std::cos(M_PI * f / fc) : 0.0, 1e-15);
      EXPECT_NEAR(RampFilter::Window(FilterWindow::kHann, f, cutoff),
                  passes ? 0.5 + 0.5 * std::cos(M_PI * f / fc) : 0.0, 1e-15);
    }
  }
  // Landmarks: at the cut-off Shepp-Logan is 2/pi, cosine and Hann 0, Hamming 0.08.
  EXPECT_NEAR(RampFilter::Window(FilterWindow::kSheppLogan, 0.5, 1.0), 2 / M_PI, 1e-15);
  EXPECT_NEAR(RampFilter::Window(FilterWindow::kCosine, 0.5, 1.0), 0.0, 1e-15);
  EXPECT_NEAR(RampFilter::Window(FilterWindow::kHann, 0.5, 1.0), 0.0, 1e-15);
  EXPECT_NEAR(RampFilter::Window(FilterWindow::kHamming, 0.5, 1.0), 0.08, 1e-15);
  for (FilterWindow window : kAllWindows) {
    EXPECT_EQ(RampFilter::Window(window, 0.0, 0.7), 1.0);
    EXPECT_EQ(RampFilter::Window(window, 0.3500001, 0.7), 0.0);
  }
}

TEST(RampFilterTest, PaddedLengthIsAPowerOfTwoOfAtLeastTwiceTheRow) {
  const std::pair<int64_t, int64_t> cases[] = {{1, 64},     {32, 64},    {33, 128},
                                               {367, 1024}, {512, 1024}, {768, 2048}};
  for (const auto& [n, length] : cases) {
    auto filter = RampFilter::Create({}, n, 1.0);
    ASSERT_TRUE(filter.ok()) << filter.status();
    EXPECT_EQ(filter->padded_length(), length) << n;
    EXPECT_EQ(filter->response().size(), static_cast<size_t>(length / 2 + 1));
    EXPECT_EQ(filter->num_detectors(), n);
  }
}

TEST(RampFilterTest, ResponseIsTheWindowedDftOfTheSpatialKernel) {
  // Direct O(L^2) DFT in double, against the FFT inside Create.
  const double d = 0.7;
  for (FilterWindow window : kAllWindows) {
    for (double cutoff : {1.0, 0.6}) {
      auto filter = RampFilter::Create({window, cutoff}, 40, d);
      ASSERT_TRUE(filter.ok());
      const int64_t length = filter->padded_length();
      ASSERT_EQ(length, 128);
      for (int64_t k = 0; k <= length / 2; ++k) {
        double dft = 0;
        for (int64_t j = 0; j < length; ++j) {
          const int64_t n = j <= length / 2 ? j : j - length;
          dft += SpatialRamp(n, d) * std::cos(2 * M_PI * static_cast<double>(j * k) / length);
        }
        const double f = static_cast<double>(k) / length;
        const double expected = dft * d * RampFilter::Window(window, f, cutoff) / length;
        EXPECT_NEAR(filter->response()[k], expected,
                    1e-6 * 0.5 / (d * length) + 1e-7 * std::abs(expected))
            << "k " << k;
      }
    }
  }
}

TEST(RampFilterTest, RampLakFilteredImpulseIsTheSpatialKernel) {
  for (double d : {1.0, 0.5, 1.7}) {
    SCOPED_TRACE(::testing::Message() << "spacing " << d);
    const int64_t n = 101;
    const int64_t centre = 50;
    auto filter = RampFilter::Create({FilterWindow::kRamLak, 1.0}, n, d);
    ASSERT_TRUE(filter.ok());
    Array3D rows({2, 1, n});
    rows.at(0, 0, centre) = 1.0f;
    rows.at(1, 0, 10) = 3.0f;  // near the edge: padding keeps wrap-around out of the row
    CpuBackend backend(2);
    ASSERT_TRUE(backend.FilterRows(*filter, rows).ok());
    const double peak = SpatialRamp(0, d) * d;
    for (int64_t j = 0; j < n; ++j) {
      EXPECT_NEAR(rows.at(0, 0, j), SpatialRamp(j - centre, d) * d, 1e-6 * peak) << j;
      EXPECT_NEAR(rows.at(1, 0, j), 3 * SpatialRamp(j - 10, d) * d, 3e-6 * peak) << j;
    }
  }
}

TEST(RampFilterTest, InvalidOptionsNameTheField) {
  for (double cutoff : {0.0, -0.5, 1.0000001, std::numeric_limits<double>::quiet_NaN()}) {
    const absl::Status status = RampFilter::Create({FilterWindow::kHann, cutoff}, 10, 1.0).status();
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << cutoff;
    EXPECT_THAT(status.message(), HasSubstr("cutoff: "));
    EXPECT_THAT(status.message(), HasSubstr("is out of range (0, 1]"));
  }
  EXPECT_TRUE(RampFilter::Create({FilterWindow::kHann, 1.0}, 10, 1.0).ok());
  EXPECT_EQ(RampFilter::Create({}, 10, 1.0).value().options().cutoff, 1.0);
  EXPECT_EQ(RampFilter::Create({}, 0, 1.0).status().message(), "num_detectors: 0 must be >= 1");
  EXPECT_EQ(RampFilter::Create({}, 10, -2.0).status().message(),
            "detector_spacing_mm: -2 must be a finite value > 0");
}

TEST(RampFilterTest, OrderOneIsTheDefaultAndTheSameRamp) {
  for (FilterWindow window : kAllWindows) {
    for (int64_t n : {1, 40, 367}) {
      auto plain = RampFilter::Create({window, 0.9}, n, 0.35);
      auto ramp = RampFilter::Create({window, 0.9}, n, 0.35, FilterOrder::kRamp);
      ASSERT_TRUE(plain.ok() && ramp.ok());
      EXPECT_EQ(plain->order(), FilterOrder::kRamp);
      EXPECT_EQ(plain->response(), ramp->response());
    }
  }
}

TEST(RampFilterTest, ParabolaResponseIsTheWindowedDftOfItsSpatialKernel) {
  const double d = 0.7;
  for (FilterWindow window : kAllWindows) {
    for (double cutoff : {1.0, 0.6}) {
      auto filter = RampFilter::Create({window, cutoff}, 40, d, FilterOrder::kParabola);
      ASSERT_TRUE(filter.ok());
      EXPECT_EQ(filter->order(), FilterOrder::kParabola);
      const int64_t length = filter->padded_length();
      ASSERT_EQ(length, 128);
      for (int64_t k = 0; k <= length / 2; ++k) {
        double dft = 0;
        for (int64_t j = 0; j < length; ++j) {
          const int64_t n = j <= length / 2 ? j : j - length;
          dft += SpatialParabola(n, d) * std::cos(2 * M_PI * static_cast<double>(j * k) / length);
        }
        const double f = static_cast<double>(k) / length;
        const double expected = dft * d * RampFilter::Window(window, f, cutoff) / length;
        EXPECT_NEAR(filter->response()[k], expected,
                    1e-6 * 0.25 / (d * d * length) + 1e-7 * std::abs(expected))
            << "k " << k;
      }
    }
  }
}

TEST(RampFilterTest, ParabolaIsFrequencySquaredInCyclesPerMm) {
  // response * length = (k / (length d))^2 for the discrete frequencies (the sampled kernel
  // is truncated at |n| <= length / 2, which costs ~1/length^2 below Nyquist), 0 at DC.
  for (double d : {0.25, 1.0, 1.6}) {
    auto filter = RampFilter::Create({}, 100, d, FilterOrder::kParabola);
    ASSERT_TRUE(filter.ok());
    const int64_t length = filter->padded_length();
    const double nyquist2 = 0.25 / (d * d);
    EXPECT_NEAR(filter->response()[0] * length, 0.0, 1e-5 * nyquist2);
    for (int64_t k = 1; k <= 3 * length / 8; ++k) {
      const double f = static_cast<double>(k) / (length * d);
      EXPECT_NEAR(filter->response()[k] * length, f * f, 1e-4 * nyquist2)
          << "d " << d << " k " << k;
    }
  }
}

TEST(RampFilterTest, ParabolaFilteredImpulseIsTheSpatialKernel) {
  for (double d : {1.0, 0.3}) {
    SCOPED_TRACE(::testing::Message() << "spacing " << d);
    const int64_t n = 77;
    auto filter = RampFilter::Create({FilterWindow::kRamLak, 1.0}, n, d, FilterOrder::kParabola);
    ASSERT_TRUE(filter.ok());
    Array3D rows({2, 1, n});
    rows.at(0, 0, 38) = 1.0f;
    rows.at(1, 0, 3) = -2.0f;
    CpuBackend backend(2);
    ASSERT_TRUE(backend.FilterRows(*filter, rows).ok());
    const double peak = SpatialParabola(0, d) * d;
    for (int64_t j = 0; j < n; ++j) {
      EXPECT_NEAR(rows.at(0, 0, j), SpatialParabola(j - 38, d) * d, 1e-6 * peak) << j;
      EXPECT_NEAR(rows.at(1, 0, j), -2 * SpatialParabola(j - 3, d) * d, 2e-6 * peak) << j;
    }
  }
}

TEST(RampFilterTest, ParabolaOfASpheresProfileIsMinusItsSecondDerivativeOver4PiSquared) {
  // A ball of radius 1 mm and density 1 has plane integrals pi (1 - t^2), whose second
  // derivative is -2 pi inside: the filter gives 2 pi / (4 pi^2) = 1 / (2 pi) there, away
  // from the kinks at |t| = 1, whose band-limited echo alternates in sign from sample to
  // sample (2% at 50 samples from the kink), so neighbours are averaged.
  const double d = 0.01;
  const int64_t n = 301;
  auto filter = RampFilter::Create({}, n, d, FilterOrder::kParabola);
  ASSERT_TRUE(filter.ok());
  Array3D row({1, 1, n});
  for (int64_t j = 0; j < n; ++j) {
    const double t = (j - 150) * d;
    row.at(0, 0, j) = static_cast<float>(std::abs(t) < 1 ? M_PI * (1 - t * t) : 0.0);
  }
  CpuBackend backend(1);
  ASSERT_TRUE(backend.FilterRows(*filter, row).ok());
  for (int64_t j = 100; j <= 200; ++j) {
    EXPECT_NEAR(row.at(0, 0, j), 1 / (2 * M_PI), 0.025 / (2 * M_PI)) << j;
    EXPECT_NEAR(0.5 * (row.at(0, 0, j) + row.at(0, 0, j + 1)), 1 / (2 * M_PI), 1e-3 / (2 * M_PI))
        << j;
  }
}

TEST(RampFilterTest, UnknownOrderIsRefused) {
  EXPECT_EQ(RampFilter::Create({}, 10, 1.0, static_cast<FilterOrder>(3)).status().message(),
            "order: 3 is not 1 (ramp) or 2 (parabola)");
}

}  // namespace
}  // namespace tomo::core
