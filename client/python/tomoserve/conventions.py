"""scikit-image's conventions and ours (docs/python.md).

skimage.transform.radon(image, theta) returns a sinogram (detector bins, angles): bin k of
angle t (degrees) integrates image along the line s = x cos t + y sin t with x = column -
N//2 and y = N//2 - row (row 0 at the top), s = k - K//2 for K bins. Ours (docs/geometry.md):
s_k = (k - (K - 1) / 2) spacing + detector_offset_mm, the same angle t, and a volume indexed
(z, y, x) with y growing with the row index and its centre at volume.center_mm. So:
  - the sinogram is transposed to (views, 1, bins);
  - for an even K the detector is offset by half a bin (-spacing / 2), and for an even N the
    grid's centre by half a pixel (x -1/2, y +1/2), so that the rotation axis is skimage's
    pixel (N//2, N//2) and the grids coincide;
  - the volume's rows are flipped (volume_to_skimage) to compare with the image.
"""
import numpy as np


def parallel_spec_from_skimage(sinogram, theta_deg, image_size, pixel_mm=1.0):
    """The JobSpec (as a dict) and the projections (float32, views x 1 x bins) of a
    skimage.transform.radon sinogram of an image_size x image_size image with pixels of
    pixel_mm, its slice reconstructed on skimage's own pixel grid."""
    sinogram = np.asarray(sinogram, dtype=np.float32)
    bins, views = sinogram.shape
    if views != len(theta_deg):
        raise ValueError(f"sinogram has {views} angles, theta {len(theta_deg)}")
    half = lambda n: ((n - 1) / 2 - n // 2) * pixel_mm  # noqa: E731  (0 or -pixel/2)
    spec = {
        "geometry": {"parallel2d": {
            "numDetectors": bins, "detectorSpacingMm": pixel_mm,
            "detectorOffsetMm": half(bins),
            "angles": {"list": {"degrees": [float(t) for t in theta_deg]}}}},
        "volume": {"size": {"x": image_size, "y": image_size, "z": 1},
                   "voxelSizeMm": {"x": pixel_mm, "y": pixel_mm, "z": pixel_mm},
                   "centerMm": {"x": half(image_size), "y": -half(image_size), "z": 0}},
        "input": {"encoding": "DATA_ENCODING_FLOAT32_LE"},
        # The sinogram is in pixels of line integral: reconstruct in 1/pixel.
        "algorithm": {"fbp": {"window": "FILTER_WINDOW_RAM_LAK"}},
    }
    return spec, np.ascontiguousarray(sinogram.T[:, None, :] * pixel_mm)


def volume_to_skimage(volume):
    """A slice of our (z, y, x) volume as skimage shows an image: row 0 at the top (largest
    y). For a 3D volume, every slice."""
    volume = np.asarray(volume)
    return volume[..., ::-1, :] if volume.ndim == 3 else volume[::-1, :]
