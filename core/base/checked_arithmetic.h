// Checked integer arithmetic: the one way sizes, counts and products computed from outside
// input (a request, a file header) are formed. Each function returns the exact result, or
// nullopt when it does not fit the result type (or when a value does not fit it to begin
// with, e.g. a negative count into an unsigned size); no wrap-around, no undefined
// behaviour. Built on the compiler's __builtin_add_overflow / __builtin_mul_overflow
// (gcc, clang, nvcc's host compiler), which take mixed operand types and check against
// the result type.
//
// Header-only, no state, thread-safe.
//
//   std::optional<uint64_t> bytes = core::CheckedProduct<uint64_t>(views, rows, columns, 4);
//   if (!bytes) return absl::InvalidArgumentError("input: views x rows x columns x 4 ...");
//
//   core::CheckedSum<uint64_t> total;
//   for (const auto& file : files) total.Add(file.size_bytes());
//   if (!total.ok()) return ...;   // total.value() is meaningful only when ok()
#pragma once

#include <cstdint>
#include <optional>
#include <type_traits>

namespace tomo::core {

// a + b in Result.
template <typename Result, typename A, typename B>
std::optional<Result> CheckedAdd(A a, B b) {
  static_assert(std::is_integral_v<Result> && std::is_integral_v<A> && std::is_integral_v<B>);
  Result out;
  if (__builtin_add_overflow(a, b, &out)) return std::nullopt;
  return out;
}

// a - b in Result (e.g. a remaining size that must not go below 0 in an unsigned type).
template <typename Result, typename A, typename B>
std::optional<Result> CheckedSub(A a, B b) {
  static_assert(std::is_integral_v<Result> && std::is_integral_v<A> && std::is_integral_v<B>);
  Result out;
  if (__builtin_sub_overflow(a, b, &out)) return std::nullopt;
  return out;
}

// a * b in Result.
template <typename Result, typename A, typename B>
std::optional<Result> CheckedMul(A a, B b) {
  static_assert(std::is_integral_v<Result> && std::is_integral_v<A> && std::is_integral_v<B>);
  Result out;
  if (__builtin_mul_overflow(a, b, &out)) return std::nullopt;
  return out;
}

// The product of all factors in Result; nullopt when any factor or partial product does
// not fit.
template <typename Result, typename First, typename... Rest>
std::optional<Result> CheckedProduct(First first, Rest... rest) {
  static_assert(std::is_integral_v<Result> && std::is_integral_v<First>);
  Result product;
  if (__builtin_add_overflow(first, 0, &product)) return std::nullopt;  // fits Result?
  bool overflow = false;
  ((overflow = overflow || __builtin_mul_overflow(product, rest, &product)), ...);
  if (overflow) return std::nullopt;
  return product;
}

// value converted to Result when it fits (a negative int64 into uint64_t does not).
template <typename Result, typename Value>
std::optional<Result> CheckedCast(Value value) {
  return CheckedAdd<Result>(value, 0);
}

// A running sum that remembers an overflow: once a term does not fit, ok() stays false.
template <typename T>
class CheckedSum {
 public:
  static_assert(std::is_integral_v<T>);
  // Adds term; false (and ok() false from then on) when the sum no longer fits T.
  template <typename Term>
  bool Add(Term term) {
    if (overflowed_) return false;
    std::optional<T> next = CheckedAdd<T>(sum_, term);
    if (!next) {
      overflowed_ = true;
      return false;
    }
    sum_ = *next;
    return true;
  }
  bool ok() const { return !overflowed_; }
  // The sum; meaningful only while ok().
  T value() const { return sum_; }
  std::optional<T> result() const { return overflowed_ ? std::nullopt : std::optional<T>(sum_); }

 private:
  T sum_ = 0;
  bool overflowed_ = false;
};

}  // namespace tomo::core
