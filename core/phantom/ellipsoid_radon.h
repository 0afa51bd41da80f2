// The exact 3D Radon transform of an EllipsoidPhantom: its plane integrals, the oracle for
// RadonGeometry projectors and reconstructions, as EllipsoidPhantom::Project is for rays.
//
// An ellipsoid of density rho, centre c, semi-axes (a, b, c) along the axes of its rotation
// R is { c + R A u : |u| <= 1 } with A = diag(a, b, c). Its plane x . n = t is, in u, the
// plane u . m = t - c . n with m = A R^T n, which cuts the unit ball in a disc of area
// pi (1 - s^2) at distance s = (t - c . n) / |m| from the ball's centre; the Jacobian of
// x = c + R A u is abc and the plane's thickness scales by 1 / |m|, so
//   R(n, t) = rho pi abc (|m|^2 - (t - c . n)^2) / |m|^3   for |t - c . n| < |m|, else 0.
// Densities per mm give plane integrals in density * mm^2.
//
//   Array3D data = EllipsoidRadonTransform(EllipsoidPhantom::SheppLogan3D(30), geometry, 1);
#pragma once

#include "core/data/array3d.h"
#include "core/geometry/radon_geometry.h"
#include "core/geometry/vec3.h"
#include "core/phantom/ellipsoid_phantom.h"

namespace tomo::core {

// The integral of the phantom over the plane { x : x . unit_normal = t_mm }; unit_normal
// must be of unit length.
double EllipsoidPlaneIntegral(const EllipsoidPhantom& phantom, const Vec3& unit_normal,
                              double t_mm);

// Projections (directions, 1, samples) of `geometry` (which should be valid): sample k of
// direction i is the mean of `supersampling` plane integrals at offsets spread evenly over
// [t_k - dt/2, t_k + dt/2] (1: the plane integral at t_k). Float64 sums, parallel over
// directions.
Array3D EllipsoidRadonTransform(const EllipsoidPhantom& phantom, const RadonGeometry& geometry,
                                int supersampling);

}  // namespace tomo::core
