// The overlap search (src/boundary/overlap.cpp) against enumerating every byte of small random views.
#include <gtest/gtest.h>

#include <map>
#include <random>
#include <set>

#include "boundary/overlap.h"

namespace {

using tileops::overlap::Answer;
using tileops::overlap::Layout;

// Every byte of every element, as (byte, flat element index).
std::vector<std::pair<int64_t, int64_t>> bytes_of(const Layout& l) {
  std::vector<std::pair<int64_t, int64_t>> out;
  int64_t numel = 1;
  for (auto s : l.sizes) numel *= s;
  for (int64_t flat = 0; flat < numel; ++flat) {
    int64_t rest = flat, at = l.offset;
    for (size_t d = l.sizes.size(); d-- > 0;) {
      at += (rest % l.sizes[d]) * l.strides[d];
      rest /= l.sizes[d];
    }
    for (int64_t b = 0; b < l.item; ++b) out.emplace_back(at + b, flat);
  }
  return out;
}

bool brute_self(const Layout& l) {
  std::map<int64_t, int64_t> owner;
  for (auto [byte, flat] : bytes_of(l)) {
    auto [it, fresh] = owner.emplace(byte, flat);
    if (!fresh && it->second != flat) return true;
  }
  return false;
}

bool brute_pair(const Layout& a, const Layout& b) {
  std::set<int64_t> seen;
  for (auto [byte, flat] : bytes_of(a)) seen.insert(byte);
  for (auto [byte, flat] : bytes_of(b))
    if (seen.count(byte)) return true;
  return false;
}

Layout random_layout(std::mt19937& rng, int64_t item) {
  std::uniform_int_distribution<int> ndim(1, 3), size(0, 4), stride(0, 12), offset(0, 20);
  Layout l;
  l.item = item;
  l.offset = offset(rng) * item;
  for (int d = ndim(rng); d > 0; --d) {
    l.sizes.push_back(size(rng));
    l.strides.push_back(stride(rng) * item);
  }
  return l;
}

TEST(Overlap, SelfMatchesEnumerationOnRandomViews) {
  std::mt19937 rng(7);
  int yes = 0;
  for (int i = 0; i < 4000; ++i) {
    const Layout l = random_layout(rng, i % 2 ? 4 : 1);
    const Answer got = tileops::overlap::self_overlap(l);
    ASSERT_NE(got, Answer::kUnknown);
    ASSERT_EQ(got == Answer::kYes, brute_self(l)) << "case " << i << " sizes " << ::testing::PrintToString(l.sizes)
                                                   << " strides " << ::testing::PrintToString(l.strides) << " item " << l.item;
    yes += got == Answer::kYes;
  }
  EXPECT_GT(yes, 400);  // both answers are exercised
  EXPECT_LT(yes, 3600);
}

TEST(Overlap, PairMatchesEnumerationOnRandomViews) {
  std::mt19937 rng(11);
  int yes = 0;
  for (int i = 0; i < 4000; ++i) {
    const Layout a = random_layout(rng, 2), b = random_layout(rng, i % 3 ? 2 : 4);  // and a reinterpreted view
    const Answer got = tileops::overlap::overlap(a, b);
    ASSERT_NE(got, Answer::kUnknown);
    ASSERT_EQ(got == Answer::kYes, brute_pair(a, b)) << "case " << i;
    yes += got == Answer::kYes;
  }
  EXPECT_GT(yes, 400);
  EXPECT_LT(yes, 3600);
}

// vLLM's q and k, split from one [tokens, (8 + 2 * 2) * 128] bf16 qkv tensor: disjoint, decided fast.
TEST(Overlap, SplitQkvIsDisjointAndPrefixViewIsNot) {
  const int64_t width = (8 + 4) * 128 * 2, tokens = 4096;
  const Layout q{0, {tokens, 8 * 128}, {width, 2}, 2};
  const Layout k{8 * 128 * 2, {tokens, 2 * 128}, {width, 2}, 2};
  EXPECT_EQ(tileops::overlap::overlap(q, k), Answer::kNo);
  EXPECT_EQ(tileops::overlap::self_overlap(q), Answer::kNo);
  const Layout k_prefix{0, {tokens, 2}, {width, 2}, 2};  // k = q[:, :2]
  EXPECT_EQ(tileops::overlap::overlap(q, k_prefix), Answer::kYes);
}

}  // namespace
