#include "boundary/overlap.h"

#include <algorithm>

namespace tileops::overlap {
namespace {

using Wide = __int128;  // sums of byte offsets never overflow it

// coef * x for x in [lo, hi]; `index`: x is a difference of two indices of one view (self overlap).
struct Term {
  int64_t coef;
  int64_t lo, hi;
  bool index;
};

Wide floor_div(Wide a, Wide b) { return a / b - ((a % b != 0) && ((a < 0) != (b < 0))); }
Wide ceil_div(Wide a, Wide b) { return -floor_div(-a, b); }

// Is there an x per term, in its range, with sum(coef * x) == target (and, for self overlap, some
// index term nonzero)? Terms go largest coefficient first, so for strided views each level leaves
// one or two candidates; a layout that leaves many runs out of budget and answers kUnknown.
class Search {
 public:
  Search(std::vector<Term> terms, bool need_nonzero) : terms_(std::move(terms)), need_nonzero_(need_nonzero) {
    std::sort(terms_.begin(), terms_.end(), [](const Term& a, const Term& b) { return a.coef > b.coef; });
    rest_lo_.assign(terms_.size() + 1, 0);
    rest_hi_.assign(terms_.size() + 1, 0);
    for (size_t i = terms_.size(); i-- > 0;) {
      rest_lo_[i] = rest_lo_[i + 1] + Wide(terms_[i].coef) * terms_[i].lo;
      rest_hi_[i] = rest_hi_[i + 1] + Wide(terms_[i].coef) * terms_[i].hi;
    }
  }

  Answer solve(Wide target) { return level(0, target, false); }

 private:
  Answer level(size_t i, Wide target, bool nonzero) {
    if (i == terms_.size()) return target == 0 && (nonzero || !need_nonzero_) ? Answer::kYes : Answer::kNo;
    const Term& t = terms_[i];
    // Only the x that leave a target the remaining terms can still reach.
    const Wide lo = std::max<Wide>(t.lo, ceil_div(target - rest_hi_[i + 1], t.coef));
    const Wide hi = std::min<Wide>(t.hi, floor_div(target - rest_lo_[i + 1], t.coef));
    for (Wide x = lo; x <= hi; ++x) {
      if (--budget_ < 0) return Answer::kUnknown;
      const Answer a = level(i + 1, target - x * t.coef, nonzero || (t.index && x != 0));
      if (a != Answer::kNo) return a;
    }
    return Answer::kNo;
  }

  std::vector<Term> terms_;
  std::vector<Wide> rest_lo_, rest_hi_;
  bool need_nonzero_;
  int64_t budget_ = 1 << 16;
};

// A term for stride s over x in [lo, hi], with a positive coefficient.
Term term(int64_t s, int64_t lo, int64_t hi, bool index) {
  return s >= 0 ? Term{s, lo, hi, index} : Term{-s, -hi, -lo, index};
}

}  // namespace

Answer self_overlap(const Layout& a) {
  if (std::find(a.sizes.begin(), a.sizes.end(), 0) != a.sizes.end()) return Answer::kNo;
  std::vector<Term> terms;
  for (size_t d = 0; d < a.sizes.size(); ++d) {
    if (a.sizes[d] == 1) continue;
    if (a.strides[d] == 0) return Answer::kYes;
    const int64_t n = a.sizes[d] - 1;
    terms.push_back(term(a.strides[d], -n, n, true));
  }
  for (size_t i = 0; i < terms.size(); ++i)  // two dims with one stride: index +1 in one, -1 in the other
    for (size_t j = i + 1; j < terms.size(); ++j)
      if (terms[i].coef == terms[j].coef) return Answer::kYes;
  if (a.item > 1) terms.push_back({1, -(a.item - 1), a.item - 1, false});  // bytes within one element
  return Search(std::move(terms), true).solve(0);
}

Answer overlap(const Layout& a, const Layout& b) {
  for (const Layout* v : {&a, &b})
    if (std::find(v->sizes.begin(), v->sizes.end(), 0) != v->sizes.end()) return Answer::kNo;
  std::vector<Term> terms;
  // Element A of a and B of b share a byte iff A - B lies in [-(a.item - 1), b.item - 1]:
  // sum(a strides) - sum(b strides) - e == b.offset - a.offset.
  auto add = [&terms](Term t) {
    for (Term& u : terms) {
      if (u.coef == t.coef) {  // one coefficient, two ranges: their sums are one range
        u.lo += t.lo;
        u.hi += t.hi;
        return;
      }
    }
    terms.push_back(t);
  };
  for (size_t d = 0; d < a.sizes.size(); ++d)
    if (a.sizes[d] > 1 && a.strides[d] != 0) add(term(a.strides[d], 0, a.sizes[d] - 1, false));
  for (size_t d = 0; d < b.sizes.size(); ++d)
    if (b.sizes[d] > 1 && b.strides[d] != 0) add(term(-b.strides[d], 0, b.sizes[d] - 1, false));
  add({1, -(b.item - 1), a.item - 1, false});
  return Search(std::move(terms), false).solve(Wide(b.offset) - a.offset);
}

}  // namespace tileops::overlap
