// Whether strided views share bytes, decided exactly where ATen's quick test answers "too hard"
// (any non-dense view): q and k split from one qkv tensor do not overlap; k = q[:, :2] does.
#pragma once

#include <cstdint>
#include <vector>

namespace tileops::overlap {

enum class Answer { kNo, kYes, kUnknown };  // kUnknown: the search ran past its budget

// One strided view in bytes: element i0..in at offset + sum(i_d * stride_d), each `item` bytes wide.
struct Layout {
  int64_t offset = 0;
  std::vector<int64_t> sizes;
  std::vector<int64_t> strides;  // in bytes
  int64_t item = 1;
};

// Do two elements of `a` (at different indices) share a byte?
Answer self_overlap(const Layout& a);
// Does an element of `a` share a byte with an element of `b` (both views of one allocation)?
Answer overlap(const Layout& a, const Layout& b);

}  // namespace tileops::overlap
