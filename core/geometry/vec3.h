// Vec3: a point or direction in the object frame, in mm (docs/geometry.md), with the few
// operations geometry code needs. A plain value; float64 because geometry is computed once
// per view on the host and must not lose the sub-micron detail of a 1 m source distance.
//
//   Vec3 ray = Normalized(detector_pixel - source);
//   double along = Dot(point - source, ray);
#pragma once

#include <cmath>

namespace tomo::core {

struct Vec3 {
  double x = 0, y = 0, z = 0;
};

inline Vec3 operator+(const Vec3& a, const Vec3& b) { return {a.x + b.x, a.y + b.y, a.z + b.z}; }
inline Vec3 operator-(const Vec3& a, const Vec3& b) { return {a.x - b.x, a.y - b.y, a.z - b.z}; }
inline Vec3 operator-(const Vec3& a) { return {-a.x, -a.y, -a.z}; }
inline Vec3 operator*(double s, const Vec3& a) { return {s * a.x, s * a.y, s * a.z}; }
inline Vec3 operator*(const Vec3& a, double s) { return s * a; }
inline double Dot(const Vec3& a, const Vec3& b) { return a.x * b.x + a.y * b.y + a.z * b.z; }
inline Vec3 Cross(const Vec3& a, const Vec3& b) {
  return {a.y * b.z - a.z * b.y, a.z * b.x - a.x * b.z, a.x * b.y - a.y * b.x};
}
inline double Norm(const Vec3& a) { return std::sqrt(Dot(a, a)); }
// a / |a|; a must not be zero.
inline Vec3 Normalized(const Vec3& a) { return (1.0 / Norm(a)) * a; }
inline bool IsFinite(const Vec3& a) {
  return std::isfinite(a.x) && std::isfinite(a.y) && std::isfinite(a.z);
}

}  // namespace tomo::core
