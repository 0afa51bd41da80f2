// ViewBlocks: a stored system matrix seen as blocks of views, the interface block ART runs
// on: the forward product of one block, its transpose added into an image, and the data
// the step length needs. Two implementations: SymmetricViewBlocks (blocks = orbits of the
// square symmetry) and CsrViewBlocks (blocks = views_per_block views spread evenly over the
// scan: view j, j + B, j + 2B, ... with B the number of blocks).
//
// A block's vector (ForwardBlock's y, BackBlockAdd's z) is views x columns, views in
// BlockViews order. Thread-compatible.
//
//   CsrViewBlocks blocks(csr, /*views_per_block=*/8);
//   blocks.ForwardBlock(b, x, y);  blocks.BackBlockAdd(b, z, x);
#pragma once

#include <cstdint>
#include <vector>

#include "core/system_matrix/csr_system_matrix.h"
#include "core/system_matrix/symmetric_system_matrix.h"

namespace tomo::core::system_matrix {

class ViewBlocks {
 public:
  virtual ~ViewBlocks() = default;
  virtual int64_t num_views() const = 0;
  virtual int64_t columns() const = 0;
  virtual int64_t nx() const = 0;
  virtual int64_t ny() const = 0;
  virtual int64_t num_blocks() const = 0;
  virtual const std::vector<int64_t>& BlockViews(int64_t block) const = 0;
  virtual void ForwardBlock(int64_t block, const float* x, float* y) const = 0;
  virtual void BackBlockAdd(int64_t block, const float* z, float* x) const = 0;
  // Squared norm of row (view, column).
  virtual float RowNorm2(int64_t view, int64_t column) const = 0;
  // An upper bound on how many rows of the block meet one pixel.
  virtual int64_t MaxRowsPerPixel(int64_t block) const = 0;
};

class SymmetricViewBlocks final : public ViewBlocks {
 public:
  explicit SymmetricViewBlocks(const SymmetricSystemMatrix& a) : a_(a) {}
  int64_t num_views() const override { return a_.scan().num_views(); }
  int64_t columns() const override { return a_.scan().columns(); }
  int64_t nx() const override { return a_.scan().nx(); }
  int64_t ny() const override { return a_.scan().ny(); }
  int64_t num_blocks() const override { return a_.num_blocks(); }
  const std::vector<int64_t>& BlockViews(int64_t block) const override {
    return a_.BlockViews(block);
  }
  void ForwardBlock(int64_t block, const float* x, float* y) const override {
    a_.ForwardBlock(block, x, y);
  }
  void BackBlockAdd(int64_t block, const float* z, float* x) const override {
    a_.BackBlockGather(block, z, x);
  }
  float RowNorm2(int64_t view, int64_t column) const override;
  int64_t MaxRowsPerPixel(int64_t block) const override {
    return static_cast<int64_t>(a_.BlockViews(block).size()) * a_.max_rows_per_pixel(block);
  }

 private:
  const SymmetricSystemMatrix& a_;
};

class CsrViewBlocks final : public ViewBlocks {
 public:
  // views_per_block in [1, views] (validated by the caller, block_art.h).
  CsrViewBlocks(const CsrSystemMatrix& a, int64_t views_per_block);
  int64_t num_views() const override { return a_.views(); }
  int64_t columns() const override { return a_.detector_columns(); }
  int64_t nx() const override { return a_.nx(); }
  int64_t ny() const override { return a_.ny(); }
  int64_t num_blocks() const override { return static_cast<int64_t>(blocks_.size()); }
  const std::vector<int64_t>& BlockViews(int64_t block) const override {
    return blocks_[static_cast<size_t>(block)];
  }
  void ForwardBlock(int64_t block, const float* x, float* y) const override;
  void BackBlockAdd(int64_t block, const float* z, float* x) const override;
  float RowNorm2(int64_t view, int64_t column) const override {
    return norms2_[static_cast<size_t>(view * a_.detector_columns() + column)];
  }
  int64_t MaxRowsPerPixel(int64_t block) const override {
    return max_rows_[static_cast<size_t>(block)];
  }

 private:
  const CsrSystemMatrix& a_;
  std::vector<std::vector<int64_t>> blocks_;
  std::vector<float> norms2_;
  std::vector<int64_t> max_rows_;
};

}  // namespace tomo::core::system_matrix
