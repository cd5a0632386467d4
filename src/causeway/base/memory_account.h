// MemoryAccount: bounds the bytes of array buffers that one piece of work
// holds at once. The evaluator opens one account per run, so that a program
// whose values cannot fit is refused with ResourceExhausted, naming the
// instruction and the bytes, instead of aborting the process on
// std::bad_alloc (or being killed by the kernel once zero-filling touches
// pages it overcommitted).
//
// Charging is per thread. While a ScopedMemoryAccount is open on a thread,
// every buffer allocated on that thread (hlo::Literal storage, through
// MemoryCharge) is charged to the account before any memory is taken, and
// credited back when the buffer is freed: on any thread, at any later time
// (a charge keeps its account alive). A charge that would take the account
// past its limit throws MemoryLimitExceeded, a std::bad_alloc, from the
// allocation; the evaluator catches it at the instruction that allocated.
// Code that must not unwind (a collective holding its peers' state) opens a
// ScopedNonThrowingCharges: charges there still count, and never throw.
//
// MemoryAccount is thread-safe; the scopes are confined to their thread.
#ifndef CAUSEWAY_BASE_MEMORY_ACCOUNT_H_
#define CAUSEWAY_BASE_MEMORY_ACCOUNT_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <new>
#include <string>

namespace causeway {

// Thrown by a charge that would exceed its account's limit.
class MemoryLimitExceeded : public std::bad_alloc {
 public:
  MemoryLimitExceeded(int64_t requested_bytes, int64_t live_bytes,
                      int64_t limit_bytes);
  const char* what() const noexcept override { return message_.c_str(); }

  int64_t requested_bytes() const { return requested_bytes_; }
  int64_t live_bytes() const { return live_bytes_; }
  int64_t limit_bytes() const { return limit_bytes_; }

 private:
  int64_t requested_bytes_;
  int64_t live_bytes_;
  int64_t limit_bytes_;
  std::string message_;
};

class MemoryAccount {
 public:
  // `limit_bytes` <= 0 means the machine's physical memory.
  explicit MemoryAccount(int64_t limit_bytes);

  MemoryAccount(const MemoryAccount&) = delete;
  MemoryAccount& operator=(const MemoryAccount&) = delete;

  int64_t limit_bytes() const { return limit_bytes_; }
  int64_t live_bytes() const { return live_.load(std::memory_order_relaxed); }
  int64_t peak_bytes() const { return peak_.load(std::memory_order_relaxed); }
  // Bytes that may still be charged (0 when at or over the limit).
  int64_t available_bytes() const;

  // Adds `bytes` to the live total. Throws MemoryLimitExceeded (charging
  // nothing) when that would pass the limit, unless `may_throw` is false.
  void Charge(int64_t bytes, bool may_throw);
  void Credit(int64_t bytes);

 private:
  const int64_t limit_bytes_;
  std::atomic<int64_t> live_{0};
  std::atomic<int64_t> peak_{0};
};

// Opens `account` on this thread until destroyed (then the one open before
// is restored). The account must outlive every charge made while open:
// MemoryCharge keeps it alive through the shared_ptr.
class ScopedMemoryAccount {
 public:
  explicit ScopedMemoryAccount(std::shared_ptr<MemoryAccount> account);
  ~ScopedMemoryAccount();
  ScopedMemoryAccount(const ScopedMemoryAccount&) = delete;
  ScopedMemoryAccount& operator=(const ScopedMemoryAccount&) = delete;

  // The account open on this thread, or null.
  static const std::shared_ptr<MemoryAccount>& Current();

 private:
  std::shared_ptr<MemoryAccount> previous_;
};

// Charges made on this thread while it is open never throw.
class ScopedNonThrowingCharges {
 public:
  ScopedNonThrowingCharges();
  ~ScopedNonThrowingCharges();
  ScopedNonThrowingCharges(const ScopedNonThrowingCharges&) = delete;
  ScopedNonThrowingCharges& operator=(const ScopedNonThrowingCharges&) = delete;

 private:
  bool previous_;
};

// One buffer's charge to the account open on the constructing thread (none
// when no account is open), credited back on destruction. Movable.
class MemoryCharge {
 public:
  MemoryCharge() = default;
  explicit MemoryCharge(int64_t bytes);  // May throw MemoryLimitExceeded.
  ~MemoryCharge();
  MemoryCharge(MemoryCharge&& other) noexcept;
  MemoryCharge& operator=(MemoryCharge&& other) noexcept;
  MemoryCharge(const MemoryCharge&) = delete;
  MemoryCharge& operator=(const MemoryCharge&) = delete;

 private:
  std::shared_ptr<MemoryAccount> account_;
  int64_t bytes_ = 0;
};

// `n` uninitialised T on the heap, charged like a Literal's bytes: for a
// kernel's scratch (a converted copy of an operand, an accumulator).
template <typename T>
class ChargedArray {
 public:
  ChargedArray() = default;
  explicit ChargedArray(size_t n)
      : charge_(static_cast<int64_t>(n * sizeof(T))), data_(new T[n]) {}

  T* data() const { return data_.get(); }

 private:
  MemoryCharge charge_;  // Before data_: charged first, credited last.
  std::unique_ptr<T[]> data_;
};

// Total physical memory of this machine, in bytes.
int64_t PhysicalMemoryBytes();

}  // namespace causeway

#endif  // CAUSEWAY_BASE_MEMORY_ACCOUNT_H_
