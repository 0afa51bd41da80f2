// HDF5 scans written with libhdf5's C API for the tests, in the two layouts
// core/io/hdf5_scan_reader.h reads: Data Exchange and NXtomo. Samples are stored as
// little-endian uint16 (as detectors write them; the values are rounded) in chunks of one
// frame, so reads cross chunk boundaries as real files do.
#pragma once

#include <hdf5.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "core/data/array3d.h"

namespace tomo::testing {

inline void WriteFramesDataset(hid_t parent, const char* name, const core::Array3D& frames) {
  const core::Dims3& d = frames.dims();
  const hsize_t dims[3] = {static_cast<hsize_t>(d.d0), static_cast<hsize_t>(d.d1),
                           static_cast<hsize_t>(d.d2)};
  const hsize_t chunk[3] = {1, dims[1], dims[2]};
  std::vector<uint16_t> values(static_cast<size_t>(frames.size()));
  for (size_t i = 0; i < values.size(); ++i) {
    values[i] = static_cast<uint16_t>(std::lround(frames.data()[i]));
  }
  hid_t space = H5Screate_simple(3, dims, nullptr);
  hid_t properties = H5Pcreate(H5P_DATASET_CREATE);
  H5Pset_chunk(properties, 3, chunk);
  hid_t dataset = H5Dcreate2(parent, name, H5T_STD_U16LE, space, H5P_DEFAULT, properties,
                             H5P_DEFAULT);
  H5Dwrite(dataset, H5T_NATIVE_UINT16, H5S_ALL, H5S_ALL, H5P_DEFAULT, values.data());
  H5Dclose(dataset);
  H5Pclose(properties);
  H5Sclose(space);
}

template <typename T>
void WriteVectorDataset(hid_t parent, const char* name, const std::vector<T>& values,
                        hid_t file_type, hid_t memory_type, const char* units = nullptr) {
  const hsize_t dims[1] = {values.size()};
  hid_t space = H5Screate_simple(1, dims, nullptr);
  hid_t dataset =
      H5Dcreate2(parent, name, file_type, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  H5Dwrite(dataset, memory_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, values.data());
  if (units != nullptr) {
    hid_t type = H5Tcopy(H5T_C_S1);
    H5Tset_size(type, std::string(units).size());
    hid_t scalar = H5Screate(H5S_SCALAR);
    hid_t attribute = H5Acreate2(dataset, "units", type, scalar, H5P_DEFAULT, H5P_DEFAULT);
    H5Awrite(attribute, type, units);
    H5Aclose(attribute);
    H5Sclose(scalar);
    H5Tclose(type);
  }
  H5Dclose(dataset);
  H5Sclose(space);
}

// /exchange/data, data_white, data_dark (left out when empty), theta in degrees (left out
// when empty).
inline void WriteDataExchange(const std::string& path, const core::Array3D& projections,
                              const core::Array3D& flats, const core::Array3D& darks,
                              const std::vector<double>& theta_deg) {
  hid_t file = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  hid_t exchange = H5Gcreate2(file, "exchange", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  WriteFramesDataset(exchange, "data", projections);
  if (flats.size() > 0) WriteFramesDataset(exchange, "data_white", flats);
  if (darks.size() > 0) WriteFramesDataset(exchange, "data_dark", darks);
  if (!theta_deg.empty()) {
    WriteVectorDataset(exchange, "theta", theta_deg, H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE);
  }
  H5Gclose(exchange);
  H5Fclose(file);
}

// <entry>/instrument/detector/{data, image_key} and <entry>/sample/rotation_angle (units
// attribute as given; left out when the angles are empty).
inline void WriteNxTomo(const std::string& path, const std::string& entry,
                        const core::Array3D& frames, const std::vector<int32_t>& image_keys,
                        const std::vector<double>& angles, const char* units) {
  hid_t file = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  hid_t group = H5Gcreate2(file, entry.c_str(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  hid_t instrument = H5Gcreate2(group, "instrument", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  hid_t detector = H5Gcreate2(instrument, "detector", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  WriteFramesDataset(detector, "data", frames);
  WriteVectorDataset(detector, "image_key", image_keys, H5T_STD_I32LE, H5T_NATIVE_INT32);
  if (!angles.empty()) {
    hid_t sample = H5Gcreate2(group, "sample", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    WriteVectorDataset(sample, "rotation_angle", angles, H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE,
                       units);
    H5Gclose(sample);
  }
  H5Gclose(detector);
  H5Gclose(instrument);
  H5Gclose(group);
  H5Fclose(file);
}

}  // namespace tomo::testing
