// Gloo's rendezvous store (`gloo::rendezvous::Store`, the Debian 2022 API)
// over a KeyValueStore: what the ranks of one context exchange while they
// connect (their addresses and secrets, gloo_mesh.h).
//
// One GlooStore serves one context's rendezvous: every key Gloo names is
// placed under `prefix` (so rendezvous of different contexts never collide,
// and a finished one is deleted by prefix), and every wait ends by one
// deadline. It can be aborted from another thread (the launch was
// cancelled), and it aborts itself when a watched key is set (a peer wrote
// its launch's cancel status): the waiting call, and every later one,
// throws gloo::IoException, and failure() says why.
#ifndef CAUSEWAY_TRANSPORT_GLOO_STORE_H_
#define CAUSEWAY_TRANSPORT_GLOO_STORE_H_

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include "absl/strings/string_view.h"
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "causeway/transport/key_value_store.h"
#include "gloo/rendezvous/store.h"

namespace causeway::transport {

// A status as a store value ("<code>:<message>") and back; a value that is
// not one decodes to Internal naming it.
std::string EncodeStatus(const absl::Status& status);
absl::Status DecodeStatus(absl::string_view value);

// Gloo calls set/get/wait from the thread that builds the context; Abort may
// be called from any thread. `store` must outlive this object.
class GlooStore final : public ::gloo::rendezvous::Store {
 public:
  GlooStore(KeyValueStore& store, std::string prefix, absl::Time deadline);
  ~GlooStore() override;

  void set(const std::string& key, const std::vector<char>& data) override;
  // Waits until `key` is set (Gloo's stores block in get).
  std::vector<char> get(const std::string& key) override;
  void wait(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys,
            const std::chrono::milliseconds& timeout) override;

  // Ends the rendezvous with `status` (not OK): the waiting call and every
  // later one throw, and a mesh of this rank waiting for its peers to
  // connect gives up. The first abort wins.
  void Abort(absl::Status status);
  // Aborts with the status stored at `full_key` (not under the prefix),
  // decoded with DecodeStatus, as soon as that key is set.
  void AbortWhenSet(std::string full_key);

  // Why a call threw: the abort status, DeadlineExceeded naming the key
  // that was not set in time, or the store's error. OK if none threw.
  absl::Status failure() const;
  // The abort status, if the rendezvous was aborted (its connections may
  // then lead nowhere even if connectFullMesh returned).
  absl::Status aborted() const;
  // The key (under the prefix) whose wait ran out of time, if one did.
  std::string missing_key() const;
  const std::string& prefix() const { return prefix_; }

 private:
  // Shared with the continuations of pending store calls, which may run
  // after this object is gone.
  struct Waker {
    // Records the first abort and wakes the waits (the mesh being
    // connected looks at aborted() while it waits for its peers).
    // Nothing once the rendezvous is over.
    void AbortLocked(absl::Status status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);

    absl::Mutex mu;
    absl::CondVar cv;
    absl::Status abort ABSL_GUARDED_BY(mu);
    bool finished ABSL_GUARDED_BY(mu) = false;  // The GlooStore is gone.
  };

  // Blocks until `future` is ready, the rendezvous is aborted or `deadline`
  // passes; throws gloo::IoException (recording failure()) on the last two
  // and on an error result.
  std::string AwaitValue(const Future<std::string>& future,
                         const std::string& key, absl::Time deadline);
  [[noreturn]] void Fail(absl::Status status);

  KeyValueStore& store_;
  const std::string prefix_;
  const absl::Time deadline_;
  const std::shared_ptr<Waker> waker_;
  // Values read by wait(), so that the get() Gloo issues next needs no
  // second round trip. Touched only by the building thread.
  std::map<std::string, std::string> fetched_;
  mutable absl::Mutex failure_mu_;
  absl::Status failure_ ABSL_GUARDED_BY(failure_mu_);
  std::string missing_key_ ABSL_GUARDED_BY(failure_mu_);
};

}  // namespace causeway::transport

#endif  // CAUSEWAY_TRANSPORT_GLOO_STORE_H_
