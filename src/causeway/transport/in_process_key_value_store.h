// A KeyValueStore in this process's memory: for tests, and for every
// process of a test that shares one store (the head's store is this one
// behind the worker streams).
#ifndef CAUSEWAY_TRANSPORT_IN_PROCESS_KEY_VALUE_STORE_H_
#define CAUSEWAY_TRANSPORT_IN_PROCESS_KEY_VALUE_STORE_H_

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "causeway/transport/key_value_store.h"

namespace causeway::transport {

// Thread-safe. Set and DeletePrefix resolve before they return; a Get whose
// key is set resolves at once, on the caller's thread; a waiting Get
// resolves on the thread of the Set that sets its key, or on the store's
// timer thread at its deadline. Destruction fails every waiting Get
// (Cancelled) and joins the timer thread.
class InProcessKeyValueStore final : public KeyValueStore {
 public:
  InProcessKeyValueStore();
  ~InProcessKeyValueStore() override;

  InProcessKeyValueStore(const InProcessKeyValueStore&) = delete;
  InProcessKeyValueStore& operator=(const InProcessKeyValueStore&) = delete;

  Future<> Set(std::string key, std::string value) override;
  Future<std::string> Get(std::string key, absl::Time deadline) override;
  Future<> DeletePrefix(std::string prefix) override;

  // The keys held now that start with `prefix`, sorted (for tests and the
  // status view).
  std::vector<std::string> Keys(absl::string_view prefix = "") const;

 private:
  struct Waiter {
    std::string key;
    absl::Time deadline;
    Promise<std::string> promise;
  };

  void TimerLoop();

  mutable absl::Mutex mu_;
  std::map<std::string, std::string, std::less<>> values_ ABSL_GUARDED_BY(mu_);
  uint64_t next_waiter_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<uint64_t, Waiter> waiters_ ABSL_GUARDED_BY(mu_);
  std::multimap<std::string, uint64_t, std::less<>> waiters_by_key_
      ABSL_GUARDED_BY(mu_);
  std::set<std::pair<absl::Time, uint64_t>> waiters_by_deadline_
      ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  absl::CondVar timer_cv_;
  std::thread timer_;
};

}  // namespace causeway::transport

#endif  // CAUSEWAY_TRANSPORT_IN_PROCESS_KEY_VALUE_STORE_H_
