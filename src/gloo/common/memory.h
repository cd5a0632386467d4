// Debian's libgloo-dev (0.0~git20220518.5b14351) installs the TCP
// transport's headers (gloo/transport/tcp/{pair,context,unbound_buffer}.h)
// but not gloo/common/memory.h, which they include. Causeway subclasses
// gloo::transport::tcp::Pair to hand Gloo sockets it has authenticated
// itself (causeway/transport/gloo_mesh.h), so it needs those headers to
// compile; this file declares the three pointer wrappers they name, with
// the layout libgloo was built with (one std::shared_ptr or std::weak_ptr
// each), so that the classes' sizes and member offsets agree with the
// library's. Causeway's code never uses these types itself.
#ifndef CAUSEWAY_GLOO_COMMON_MEMORY_H_
#define CAUSEWAY_GLOO_COMMON_MEMORY_H_

#include <memory>
#include <thread>

namespace gloo {

template <typename T>
class WeakNonOwningPtr;
template <typename T>
class ShareableNonOwningPtr;

// A strong reference taken from a weak one for the duration of a call.
template <typename T>
class NonOwningPtr final {
 public:
  NonOwningPtr() = default;
  explicit NonOwningPtr(const WeakNonOwningPtr<T>& weak)
      : strong_(weak.weak_.lock()) {}
  T* operator->() const noexcept { return strong_.get(); }
  explicit operator bool() const noexcept { return strong_ != nullptr; }

 private:
  std::shared_ptr<T> strong_;
};

// A weak reference to an object owned elsewhere; true once bound, even if
// the object is gone since.
template <typename T>
class WeakNonOwningPtr final {
 public:
  WeakNonOwningPtr() = default;
  explicit WeakNonOwningPtr(const ShareableNonOwningPtr<T>& owner)
      : weak_(owner.shared_) {}
  explicit operator bool() const noexcept {
    const std::weak_ptr<T> empty;
    return weak_.owner_before(empty) || empty.owner_before(weak_);
  }

 private:
  std::weak_ptr<T> weak_;
  friend class NonOwningPtr<T>;
};

// Lends weak references to an object it does not own; its destructor
// waits until no strong reference taken from them remains.
template <typename T>
class ShareableNonOwningPtr final {
 public:
  explicit ShareableNonOwningPtr(T* object)
      : shared_(object, [](T*) {}) {}
  ShareableNonOwningPtr(const ShareableNonOwningPtr&) = delete;
  ShareableNonOwningPtr& operator=(const ShareableNonOwningPtr&) = delete;
  ~ShareableNonOwningPtr() {
    std::weak_ptr<T> last(shared_);
    shared_.reset();
    while (!last.expired()) std::this_thread::yield();
  }

 private:
  std::shared_ptr<T> shared_;
  friend class WeakNonOwningPtr<T>;
};

}  // namespace gloo

#endif  // CAUSEWAY_GLOO_COMMON_MEMORY_H_
