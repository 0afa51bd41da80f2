// A MetaImage (.mha) reader for the tests only: parses the header keys the writer uses (and
// refuses anything else it would have to interpret), then the float32 data after
// "ElementDataFile = LOCAL". Independent of metaimage_writer.cc: it reads the text the way
// ITK's MetaIO documents it, so a wrong key, order or matrix layout in the writer fails.
//
//   std::optional<MetaImageForTests> image = ReadMetaImageForTests(path);
#pragma once

#include <array>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

namespace tomo::testing {

struct MetaImageForTests {
  std::map<std::string, std::string> header;  // key -> value text
  std::array<int64_t, 3> dim_size{};
  std::array<double, 3> spacing{};
  std::array<double, 3> offset{};
  std::array<double, 9> transform{};  // TransformMatrix as listed
  std::vector<float> data;            // x fastest

  // LPS position of voxel (i, j, k): offset + sum over axes of index x spacing x the axis's
  // direction, axis a's direction being transform[3a .. 3a+2] (ITK: SetDirection(a, ...)).
  std::array<double, 3> Position(double i, double j, double k) const {
    const double index[3] = {i, j, k};
    std::array<double, 3> p = offset;
    for (int a = 0; a < 3; ++a) {
      for (int d = 0; d < 3; ++d) p[d] += index[a] * spacing[a] * transform[3 * a + d];
    }
    return p;
  }
};

inline std::optional<MetaImageForTests> ReadMetaImageForTests(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  if (!file) return std::nullopt;
  MetaImageForTests image;
  std::string line;
  bool data_follows = false;
  while (std::getline(file, line)) {
    const size_t equals = line.find(" = ");
    if (equals == std::string::npos) return std::nullopt;
    const std::string key = line.substr(0, equals);
    const std::string value = line.substr(equals + 3);
    image.header[key] = value;
    if (key == "ElementDataFile") {
      if (value != "LOCAL") return std::nullopt;
      data_follows = true;
      break;
    }
  }
  if (!data_follows) return std::nullopt;
  auto numbers = [&](const std::string& key, size_t count) -> std::optional<std::vector<double>> {
    auto it = image.header.find(key);
    if (it == image.header.end()) return std::nullopt;
    std::istringstream in(it->second);
    std::vector<double> values;
    double v;
    while (in >> v) values.push_back(v);
    if (values.size() != count) return std::nullopt;
    return values;
  };
  if (image.header["ObjectType"] != "Image" || image.header["NDims"] != "3" ||
      image.header["ElementType"] != "MET_FLOAT" || image.header["BinaryData"] != "True" ||
      image.header["BinaryDataByteOrderMSB"] != "False" ||
      image.header["CompressedData"] != "False") {
    return std::nullopt;
  }
  auto dims = numbers("DimSize", 3);
  auto spacing = numbers("ElementSpacing", 3);
  auto offset = numbers("Offset", 3);
  auto transform = numbers("TransformMatrix", 9);
  if (!dims || !spacing || !offset || !transform) return std::nullopt;
  for (int a = 0; a < 3; ++a) {
    image.dim_size[a] = static_cast<int64_t>((*dims)[a]);
    image.spacing[a] = (*spacing)[a];
    image.offset[a] = (*offset)[a];
  }
  for (int i = 0; i < 9; ++i) image.transform[i] = (*transform)[i];
  const size_t count = static_cast<size_t>(image.dim_size[0] * image.dim_size[1] * image.dim_size[2]);
  image.data.resize(count);
  file.read(reinterpret_cast<char*>(image.data.data()), static_cast<std::streamsize>(count * 4));
  if (static_cast<size_t>(file.gcount()) != count * 4) return std::nullopt;
  if (file.peek() != std::char_traits<char>::eof()) return std::nullopt;  // trailing bytes
  return image;
}

}  // namespace tomo::testing
