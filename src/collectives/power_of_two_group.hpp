// The power-of-two sub-group used by recursive doubling and Rabenseifner's
// algorithm on any rank count: the fold of the first 2*rem ranks.
#pragma once

namespace concord::detail {

class PowerOfTwoGroup {
 public:
  PowerOfTwoGroup(int rank, int size) : rank_(rank) {
    pof2_ = 1;
    while (pof2_ * 2 <= size) pof2_ *= 2;
    rem_ = size - pof2_;
    if (rank < 2 * rem_) {
      new_rank_ = (rank % 2 == 0) ? -1 : rank / 2;
    } else {
      new_rank_ = rank - rem_;
    }
  }

  int pof2() const { return pof2_; }
  // Rank within the power-of-two group, or -1 for a rank folded out.
  int new_rank() const { return new_rank_; }
  // The group member this rank's data belongs to: its own, or its fold partner's.
  int member() const { return folds_out() ? rank_ / 2 : new_rank_; }
  bool participates() const { return new_rank_ >= 0; }
  // An even rank below 2*rem: outside the group, it gives its data (recursive
  // doubling: all of it; Rabenseifner: half) to its odd neighbour and gets the
  // result back.
  bool folds_out() const { return rank_ < 2 * rem_ && rank_ % 2 == 0; }
  // An odd rank below 2*rem: the group member that its even neighbour folds into.
  bool folds_in() const { return rank_ < 2 * rem_ && rank_ % 2 == 1; }
  int fold_partner() const { return folds_out() ? rank_ + 1 : rank_ - 1; }
  // The real rank of group member `new_rank`.
  int real_rank(int new_rank) const { return new_rank < rem_ ? new_rank * 2 + 1 : new_rank + rem_; }
  // Where a fold keeps half of a member's data (Rabenseifner): the rank folded out
  // of it, or the member itself where nothing folds into it.
  int half_rank(int new_rank) const { return new_rank < rem_ ? new_rank * 2 : new_rank + rem_; }

 private:
  int rank_;
  int pof2_;
  int rem_;
  int new_rank_;
};

}  // namespace concord::detail
