#include "causeway/worker/object_store.h"

#include <algorithm>
#include <cstring>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "causeway/base/logging.h"
#include "causeway/base/status.h"
#include "causeway/transport/data_plane.h"

namespace causeway::worker {

using transport::ObjectStoreStats;

namespace {

enum class BufferState { kWaiting, kReserved, kReady, kError };

const char* StateName(BufferState state) {
  switch (state) {
    case BufferState::kWaiting:
      return "waiting";
    case BufferState::kReserved:
      return "reserved";
    case BufferState::kReady:
      return "ready";
    case BufferState::kError:
      return "error";
  }
  return "?";
}

std::string ShapeText(const hlo::Shape& shape) {
  return shape.ToString(/*with_layout=*/false);
}

// Checks that `piece` fits inside `dest` at `offsets` (see CopyPieceInto).
absl::Status ValidatePiece(const hlo::Shape& piece,
                           absl::Span<const int64_t> offsets,
                           const hlo::Shape& dest) {
  if (!piece.IsArray() || !dest.IsArray()) {
    return absl::InvalidArgumentError(
        absl::StrCat("pieces and buffers must be arrays; got a piece ",
                     ShapeText(piece), " for ", ShapeText(dest)));
  }
  if (piece.type() != dest.type()) {
    return absl::InvalidArgumentError(
        absl::StrCat("piece ", ShapeText(piece),
                     " does not have the element type of ", ShapeText(dest)));
  }
  if (piece.rank() != dest.rank() ||
      static_cast<int64_t>(offsets.size()) != dest.rank()) {
    return absl::InvalidArgumentError(
        absl::StrCat("piece ", ShapeText(piece), " with offsets [",
                     absl::StrJoin(offsets, ","),
                     "] does not have the rank of ", ShapeText(dest)));
  }
  for (int64_t d = 0; d < dest.rank(); ++d) {
    if (offsets[d] < 0 || offsets[d] > dest.dim(d) - piece.dim(d)) {
      return absl::InvalidArgumentError(
          absl::StrCat("piece ", ShapeText(piece), " at offsets [",
                       absl::StrJoin(offsets, ","), "] does not fit in ",
                       ShapeText(dest), " (dimension ", d, ": ", offsets[d],
                       " + ", piece.dim(d), " > ", dest.dim(d), ")"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CopyPieceInto(const hlo::Literal& piece,
                           absl::Span<const int64_t> offsets,
                           hlo::Literal* dest) {
  CW_RETURN_IF_ERROR(ValidatePiece(piece.shape(), offsets, dest->shape()));
  const hlo::Shape& shape = piece.shape();
  if (shape.ElementCount() == 0) return absl::OkStatus();
  const std::vector<int64_t> zeros(shape.rank(), 0);
  transport::CopyBox(static_cast<const std::byte*>(piece.untyped_data()),
                     shape.dims(), zeros,
                     static_cast<std::byte*>(dest->mutable_untyped_data()),
                     dest->shape().dims(), offsets, shape.dims(),
                     hlo::ByteWidth(shape.type()));
  return absl::OkStatus();
}

struct ObjectStore::Entry {
  BufferState state = BufferState::kWaiting;
  hlo::Shape shape;
  int64_t bytes = 0;
  int64_t refs = 1;
  Promise<> reservation;              // Set on grant (ready, for Put) or error.
  Promise<hlo::Literal> data;         // Set on ready or error.
  Future<hlo::Literal> value;         // The future of `data`.
  absl::Status error;                 // kError only.
  std::optional<hlo::Literal> early;  // Data that came while waiting.
  // Pieces: declared by ExpectPieces. Pieces that come while waiting are
  // held in `early_pieces` and copied into `assembly` on grant. Received
  // pieces passed the checks; written ones are in the assembly.
  int64_t pieces_expected = 0;
  int64_t pieces_received = 0;
  int64_t pieces_written = 0;
  int64_t piece_elements = 0;
  std::vector<std::pair<std::vector<int64_t>, hlo::Literal>> early_pieces;
  // The value being assembled (pieces) or written in place (a whole
  // value), and its first byte.
  std::optional<hlo::Literal> assembly;
  std::byte* assembly_data = nullptr;
  // In-place writes (BeginWrite) not ended yet; `whole_writer` when one
  // writes the whole value. A failed buffer keeps its assembly in
  // `detached` until they end.
  int64_t writers = 0;
  bool whole_writer = false;
  std::optional<hlo::Literal> detached;
};

// Promises to set once the store's lock is released. Declared before the
// MutexLock in each method, so it is destroyed (and sets them) after the
// lock is released.
struct ObjectStore::Resolutions {
  std::vector<std::pair<Promise<hlo::Literal>, absl::StatusOr<hlo::Literal>>>
      values;
  std::vector<std::pair<Promise<>, absl::Status>> reservations;

  void Resolve(Promise<hlo::Literal>& promise,
               absl::StatusOr<hlo::Literal> result) {
    if (promise.IsValid()) values.emplace_back(std::move(promise), result);
  }
  void Resolve(Promise<>& promise, absl::Status status) {
    if (promise.IsValid()) {
      reservations.emplace_back(std::move(promise), std::move(status));
    }
  }
  // Data first, so that a Put's future resolves after its buffer's value.
  ~Resolutions() {
    for (auto& [promise, result] : values) promise.Set(std::move(result));
    for (auto& [promise, status] : reservations) promise.Set(std::move(status));
  }
};

ObjectStore::ObjectStore(DeviceId device, int64_t budget_bytes)
    : device_(device), budget_bytes_(budget_bytes) {
  CW_CHECK(budget_bytes >= 0) << "negative memory budget " << budget_bytes;
}

// Promises still unset are dropped with their entries: their futures resolve
// with kCancelled.
ObjectStore::~ObjectStore() = default;

ObjectStore::Entry* ObjectStore::FindLocked(BufferId id) const {
  auto it = entries_.find(id);
  return it == entries_.end() ? nullptr : it->second.get();
}

absl::Status ObjectStore::NotFoundError(BufferId id) const {
  return absl::NotFoundError(absl::StrCat("buffer ", id.ToString(),
                                          " is not in the object store of "
                                          "device ",
                                          device_.value()));
}

Future<> ObjectStore::Reserve(BufferId id, const hlo::Shape& shape) {
  return ReserveWithValue(id, shape, std::nullopt);
}

Future<> ObjectStore::Put(BufferId id, hlo::Literal value) {
  hlo::Shape shape = value.shape();
  return ReserveWithValue(id, shape, std::move(value));
}

Future<> ObjectStore::ReserveWithValue(BufferId id, const hlo::Shape& shape,
                                       std::optional<hlo::Literal> value) {
  Resolutions out;
  absl::MutexLock lock(&mu_);
  if (entries_.contains(id)) {
    return MakeErrorFuture(absl::AlreadyExistsError(
        absl::StrCat("buffer ", id.ToString(), " already exists on device ",
                     device_.value())));
  }
  auto owned = std::make_unique<Entry>();
  Entry& entry = *owned;
  entries_.emplace(id, std::move(owned));
  entry.shape = shape;
  PromiseAndFuture<> reservation = MakePromise<>();
  entry.reservation = std::move(reservation.promise);
  PromiseAndFuture<hlo::Literal> data = MakePromise<hlo::Literal>();
  entry.data = std::move(data.promise);
  entry.value = std::move(data.future);

  absl::Status refusal;
  if (!lost_.ok()) {
    refusal = lost_;
  } else if (!shape.IsArray()) {
    refusal = absl::InvalidArgumentError(
        absl::StrCat("buffer ", id.ToString(),
                     " must have an array shape, not ", ShapeText(shape)));
  } else if (shape.ByteSize() > budget_bytes_) {
    refusal = absl::ResourceExhaustedError(
        absl::StrCat("buffer ", id.ToString(), " needs ", shape.ByteSize(),
                     " bytes but device ", device_.value(), " has a budget of ",
                     budget_bytes_, " bytes"));
  }
  if (!refusal.ok()) {
    FailEntryLocked(id, entry, refusal, out);
    return std::move(reservation.future);
  }
  entry.bytes = shape.ByteSize();
  entry.early = std::move(value);
  wait_queue_.push_back(id);
  GrantWaitingLocked(out);
  return std::move(reservation.future);
}

void ObjectStore::GrantWaitingLocked(Resolutions& out) {
  while (!wait_queue_.empty()) {
    const BufferId id = wait_queue_.front();
    Entry& entry = *FindLocked(id);  // The queue holds only waiting entries.
    if (entry.bytes > budget_bytes_ - used_bytes_) return;  // Strict FIFO.
    wait_queue_.pop_front();
    used_bytes_ += entry.bytes;
    entry.state = BufferState::kReserved;
    if (entry.early.has_value()) {
      hlo::Literal value = std::move(*entry.early);
      entry.early.reset();
      MakeReadyLocked(entry, std::move(value), out);
    } else if (!entry.early_pieces.empty()) {
      for (auto& [offsets, piece] : entry.early_pieces) {
        CopyIntoAssemblyLocked(entry, piece, offsets);  // Checked on arrival.
        ++entry.pieces_written;
      }
      entry.early_pieces.clear();
      if (entry.pieces_written == entry.pieces_expected) {
        CompletePiecesLocked(id, entry, out);
      }
    }
    out.Resolve(entry.reservation, absl::OkStatus());
  }
}

void ObjectStore::MakeReadyLocked(Entry& entry, hlo::Literal value,
                                  Resolutions& out) {
  entry.state = BufferState::kReady;
  out.Resolve(entry.data, std::move(value));
}

void ObjectStore::FailEntryLocked(BufferId id, Entry& entry, absl::Status error,
                                  Resolutions& out) {
  switch (entry.state) {
    case BufferState::kError:
      return;
    case BufferState::kWaiting:
      RemoveFromWaitQueueLocked(id);
      break;
    case BufferState::kReserved:
    case BufferState::kReady:
      used_bytes_ -= entry.bytes;
      break;
  }
  entry.state = BufferState::kError;
  entry.error = error;
  entry.early.reset();
  entry.early_pieces.clear();
  if (entry.writers > 0 && entry.assembly.has_value()) {
    entry.detached = std::move(entry.assembly);  // Writers still write there.
  }
  entry.assembly.reset();
  entry.assembly_data = nullptr;
  out.Resolve(entry.data, error);
  out.Resolve(entry.reservation, error);
}

absl::Status ObjectStore::RejectLocked(BufferId id, Entry& entry,
                                       absl::Status error, Resolutions& out) {
  if (entry.state == BufferState::kWaiting ||
      entry.state == BufferState::kReserved) {
    FailEntryLocked(id, entry, error, out);
  }
  return error;
}

void ObjectStore::RemoveFromWaitQueueLocked(BufferId id) {
  auto it = std::find(wait_queue_.begin(), wait_queue_.end(), id);
  if (it != wait_queue_.end()) wait_queue_.erase(it);
}

absl::Status ObjectStore::Fulfill(BufferId id, hlo::Literal value) {
  Resolutions out;
  absl::MutexLock lock(&mu_);
  Entry* entry = FindLocked(id);
  if (entry == nullptr) return NotFoundError(id);
  absl::Status status = AcceptValueLocked(id, *entry, std::move(value), out);
  GrantWaitingLocked(out);
  return status;
}

absl::Status ObjectStore::AcceptValueLocked(BufferId id, Entry& entry,
                                            hlo::Literal value,
                                            Resolutions& out) {
  if (entry.state == BufferState::kReady || entry.early.has_value() ||
      entry.whole_writer) {
    return absl::FailedPreconditionError(
        absl::StrCat("buffer ", id.ToString(), " already holds data"));
  }
  if (entry.state == BufferState::kError) {
    return absl::FailedPreconditionError(absl::StrCat(
        "buffer ", id.ToString(), " has failed: ", entry.error.ToString()));
  }
  if (entry.pieces_expected > 0) {
    return RejectLocked(
        id, entry,
        absl::FailedPreconditionError(absl::StrCat(
            "buffer ", id.ToString(), " expects ", entry.pieces_expected,
            " pieces, written with WritePiece, not one whole value")),
        out);
  }
  if (!value.shape().Compatible(entry.shape)) {
    return RejectLocked(id, entry,
                        absl::InvalidArgumentError(absl::StrCat(
                            "buffer ", id.ToString(), " was reserved as ",
                            ShapeText(entry.shape), " but was given ",
                            ShapeText(value.shape()))),
                        out);
  }
  if (entry.state == BufferState::kWaiting) {
    entry.early = std::move(value);
  } else {
    MakeReadyLocked(entry, std::move(value), out);
  }
  return absl::OkStatus();
}

absl::Status ObjectStore::ExpectPieces(BufferId id, int64_t num_pieces) {
  Resolutions out;
  absl::MutexLock lock(&mu_);
  Entry* entry = FindLocked(id);
  if (entry == nullptr) return NotFoundError(id);
  if (entry->state == BufferState::kError) {
    return absl::FailedPreconditionError(absl::StrCat(
        "buffer ", id.ToString(), " has failed: ", entry->error.ToString()));
  }
  absl::Status status;
  if (num_pieces < 1) {
    status = absl::InvalidArgumentError(
        absl::StrCat("buffer ", id.ToString(), " cannot expect ", num_pieces,
                     " pieces; it needs at least one"));
  } else if (entry->state == BufferState::kReady || entry->early.has_value() ||
             entry->pieces_expected > 0) {
    status = absl::FailedPreconditionError(absl::StrCat(
        "buffer ", id.ToString(), " already holds data or expects pieces"));
  }
  if (!status.ok()) {
    status = RejectLocked(id, *entry, status, out);
    GrantWaitingLocked(out);
    return status;
  }
  entry->pieces_expected = num_pieces;
  return absl::OkStatus();
}

absl::Status ObjectStore::WritePiece(BufferId id,
                                     absl::Span<const int64_t> offsets,
                                     hlo::Literal piece) {
  Resolutions out;
  absl::MutexLock lock(&mu_);
  Entry* entry = FindLocked(id);
  if (entry == nullptr) return NotFoundError(id);
  absl::Status status =
      AcceptPieceLocked(id, *entry, offsets, std::move(piece), out);
  GrantWaitingLocked(out);
  return status;
}

absl::Status ObjectStore::CheckPieceLocked(BufferId id, Entry& entry,
                                           absl::Span<const int64_t> offsets,
                                           const hlo::Shape& piece,
                                           Resolutions& out) {
  if (entry.state == BufferState::kReady) {
    return absl::FailedPreconditionError(
        absl::StrCat("buffer ", id.ToString(), " already holds data"));
  }
  if (entry.state == BufferState::kError) {
    return absl::FailedPreconditionError(absl::StrCat(
        "buffer ", id.ToString(), " has failed: ", entry.error.ToString()));
  }
  if (entry.pieces_expected == 0) {
    return RejectLocked(
        id, entry,
        absl::FailedPreconditionError(absl::StrCat(
            "buffer ", id.ToString(),
            " got a piece before ExpectPieces said how many to expect")),
        out);
  }
  if (entry.pieces_received == entry.pieces_expected) {
    return RejectLocked(id, entry,
                        absl::InvalidArgumentError(absl::StrCat(
                            "buffer ", id.ToString(), " got more than the ",
                            entry.pieces_expected, " pieces it expects")),
                        out);
  }
  absl::Status valid = ValidatePiece(piece, offsets, entry.shape);
  if (!valid.ok()) {
    return RejectLocked(id, entry,
                        absl::InvalidArgumentError(absl::StrCat(
                            "buffer ", id.ToString(), ": ", valid.message())),
                        out);
  }
  entry.piece_elements += piece.ElementCount();
  if (entry.piece_elements > entry.shape.ElementCount()) {
    return RejectLocked(
        id, entry,
        absl::InvalidArgumentError(absl::StrCat(
            "the pieces of buffer ", id.ToString(), " overlap: they hold ",
            entry.piece_elements, " elements, more than its ",
            entry.shape.ElementCount())),
        out);
  }
  ++entry.pieces_received;
  return absl::OkStatus();
}

absl::Status ObjectStore::AcceptPieceLocked(BufferId id, Entry& entry,
                                            absl::Span<const int64_t> offsets,
                                            hlo::Literal piece,
                                            Resolutions& out) {
  CW_RETURN_IF_ERROR(CheckPieceLocked(id, entry, offsets, piece.shape(), out));
  if (entry.state == BufferState::kWaiting) {
    entry.early_pieces.emplace_back(
        std::vector<int64_t>(offsets.begin(), offsets.end()), std::move(piece));
    return absl::OkStatus();
  }
  CopyIntoAssemblyLocked(entry, piece, offsets);
  ++entry.pieces_written;
  if (entry.pieces_written == entry.pieces_expected) {
    CompletePiecesLocked(id, entry, out);
  }
  return absl::OkStatus();
}

std::byte* ObjectStore::AssemblyLocked(Entry& entry) {
  if (!entry.assembly.has_value()) {
    // Every element is written before the buffer is ready (the pieces'
    // element count is checked), so no zero fill.
    entry.assembly.emplace(hlo::Literal::Uninitialized(entry.shape));
    entry.assembly_data =
        static_cast<std::byte*>(entry.assembly->mutable_untyped_data());
  }
  return entry.assembly_data;
}

void ObjectStore::CopyIntoAssemblyLocked(Entry& entry,
                                         const hlo::Literal& piece,
                                         absl::Span<const int64_t> offsets) {
  const hlo::Shape& shape = piece.shape();
  if (shape.ElementCount() == 0) return;
  const std::vector<int64_t> zeros(shape.rank(), 0);
  // The cached pointer, never mutable_untyped_data() again: in-place writers
  // may share the assembly's storage.
  transport::CopyBox(static_cast<const std::byte*>(piece.untyped_data()),
                     shape.dims(), zeros, AssemblyLocked(entry),
                     entry.shape.dims(), offsets, shape.dims(),
                     hlo::ByteWidth(shape.type()));
}

absl::StatusOr<std::byte*> ObjectStore::BeginWrite(
    BufferId id, absl::Span<const int64_t> offsets, const hlo::Shape& piece) {
  Resolutions out;
  absl::MutexLock lock(&mu_);
  Entry* found = FindLocked(id);
  if (found == nullptr) return NotFoundError(id);
  Entry& entry = *found;
  std::byte* data = nullptr;
  if (entry.pieces_expected == 0) {
    // The whole value, written where it will stay.
    if (entry.state == BufferState::kReady || entry.early.has_value() ||
        entry.whole_writer) {
      return absl::FailedPreconditionError(
          absl::StrCat("buffer ", id.ToString(), " already holds data"));
    }
    if (entry.state == BufferState::kError) {
      return absl::FailedPreconditionError(absl::StrCat(
          "buffer ", id.ToString(), " has failed: ", entry.error.ToString()));
    }
    const bool at_origin =
        std::all_of(offsets.begin(), offsets.end(),
                    [](int64_t offset) { return offset == 0; });
    if (!piece.Compatible(entry.shape) || !at_origin) {
      absl::Status rejected = RejectLocked(
          id, entry,
          absl::InvalidArgumentError(absl::StrCat(
              "buffer ", id.ToString(), " was reserved as ",
              ShapeText(entry.shape), " but was given ", ShapeText(piece),
              " at [", absl::StrJoin(offsets, ","), "]")),
          out);
      GrantWaitingLocked(out);
      return rejected;
    }
    entry.whole_writer = true;
    data = AssemblyLocked(entry);
  } else {
    if (entry.state == BufferState::kWaiting) {
      return absl::UnavailableError(absl::StrCat(
          "buffer ", id.ToString(), " is still waiting for memory"));
    }
    absl::Status checked = CheckPieceLocked(id, entry, offsets, piece, out);
    if (!checked.ok()) {
      GrantWaitingLocked(out);
      return checked;
    }
    data = AssemblyLocked(entry);
  }
  ++entry.writers;
  ++entry.refs;
  return data;
}

void ObjectStore::EndWrite(BufferId id, absl::Status written) {
  Resolutions out;
  absl::MutexLock lock(&mu_);
  Entry* found = FindLocked(id);
  CW_CHECK(found != nullptr) << "EndWrite without BeginWrite";  // It holds a ref.
  Entry& entry = *found;
  --entry.writers;
  const bool live = entry.state == BufferState::kWaiting ||
                    entry.state == BufferState::kReserved;
  if (!written.ok()) {
    RejectLocked(id, entry, std::move(written), out).IgnoreError();
  } else if (entry.whole_writer) {
    if (live) {
      hlo::Literal value = std::move(*entry.assembly);
      entry.assembly.reset();
      entry.assembly_data = nullptr;
      if (entry.state == BufferState::kWaiting) {
        entry.early = std::move(value);  // Ready on grant.
      } else {
        MakeReadyLocked(entry, std::move(value), out);
      }
    }
  } else if (live) {
    ++entry.pieces_written;
    if (entry.pieces_written == entry.pieces_expected) {
      CompletePiecesLocked(id, entry, out);
    }
  }
  if (entry.pieces_expected == 0) entry.whole_writer = false;
  if (entry.writers == 0) entry.detached.reset();
  ReleaseLocked(id, entry, out);  // May remove the entry.
  GrantWaitingLocked(out);
}

void ObjectStore::CompletePiecesLocked(BufferId id, Entry& entry,
                                       Resolutions& out) {
  if (entry.piece_elements != entry.shape.ElementCount()) {
    FailEntryLocked(id, entry,
                    absl::InvalidArgumentError(absl::StrCat(
                        "the ", entry.pieces_expected, " pieces of buffer ",
                        id.ToString(), " cover ", entry.piece_elements,
                        " of its ", entry.shape.ElementCount(), " elements")),
                    out);
    return;
  }
  AssemblyLocked(entry);  // A buffer of no elements has none yet.
  hlo::Literal value = std::move(*entry.assembly);
  entry.assembly.reset();
  entry.assembly_data = nullptr;
  MakeReadyLocked(entry, std::move(value), out);
}

absl::Status ObjectStore::Fail(BufferId id, absl::Status error) {
  CW_CHECK(!error.ok()) << "Fail needs an error status";
  Resolutions out;
  absl::MutexLock lock(&mu_);
  Entry* entry = FindLocked(id);
  if (entry == nullptr) return NotFoundError(id);
  if (entry->state == BufferState::kReady) {
    return absl::FailedPreconditionError(absl::StrCat(
        "buffer ", id.ToString(), " already holds data; it cannot fail with ",
        error.ToString()));
  }
  FailEntryLocked(id, *entry, std::move(error), out);
  GrantWaitingLocked(out);
  return absl::OkStatus();
}

Future<hlo::Literal> ObjectStore::Get(BufferId id) const {
  absl::MutexLock lock(&mu_);
  Entry* entry = FindLocked(id);
  if (entry == nullptr) return MakeErrorFuture<hlo::Literal>(NotFoundError(id));
  if (entry->state == BufferState::kError) {
    return MakeErrorFuture<hlo::Literal>(entry->error);
  }
  return entry->value;
}

absl::Status ObjectStore::AddRef(BufferId id) {
  absl::MutexLock lock(&mu_);
  Entry* entry = FindLocked(id);
  if (entry == nullptr) return NotFoundError(id);
  ++entry->refs;
  return absl::OkStatus();
}

absl::Status ObjectStore::Release(BufferId id) {
  Resolutions out;
  absl::MutexLock lock(&mu_);
  Entry* entry = FindLocked(id);
  if (entry == nullptr) return NotFoundError(id);
  ReleaseLocked(id, *entry, out);
  GrantWaitingLocked(out);
  return absl::OkStatus();
}

void ObjectStore::ReleaseLocked(BufferId id, Entry& entry, Resolutions& out) {
  if (--entry.refs > 0) return;
  if (entry.state == BufferState::kReady) {
    used_bytes_ -= entry.bytes;
  } else {
    FailEntryLocked(
        id, entry,
        absl::CancelledError(absl::StrCat(
            "buffer ", id.ToString(), " was released before its data arrived")),
        out);
  }
  entries_.erase(id);
}

void ObjectStore::FailAll(absl::Status error) {
  CW_CHECK(!error.ok()) << "FailAll needs an error status";
  Resolutions out;
  absl::MutexLock lock(&mu_);
  if (lost_.ok()) lost_ = error;
  for (auto& [id, entry] : entries_) {
    if (entry->state == BufferState::kReady) {
      // Its value was handed out already; only later readers see the loss.
      used_bytes_ -= entry->bytes;
      entry->state = BufferState::kError;
      entry->error = error;
    } else {
      FailEntryLocked(id, *entry, error, out);
    }
  }
  CW_CHECK(wait_queue_.empty() && used_bytes_ == 0);
}

ObjectStoreStats ObjectStore::Stats() const {
  absl::MutexLock lock(&mu_);
  return StatsLocked();
}

ObjectStoreStats ObjectStore::StatsLocked() const {
  ObjectStoreStats stats;
  stats.budget_bytes = budget_bytes_;
  stats.used_bytes = used_bytes_;
  for (const auto& [id, entry] : entries_) {
    switch (entry->state) {
      case BufferState::kWaiting:
        ++stats.num_waiting;
        stats.waiting_bytes += entry->bytes;
        break;
      case BufferState::kReserved:
        ++stats.num_reserved;
        stats.reserved_bytes += entry->bytes;
        break;
      case BufferState::kReady:
        ++stats.num_ready;
        break;
      case BufferState::kError:
        ++stats.num_error;
        break;
    }
  }
  return stats;
}

std::string ObjectStore::DebugString() const {
  absl::MutexLock lock(&mu_);
  const ObjectStoreStats stats = StatsLocked();
  std::string text = absl::StrCat(
      "device ", device_.value(), ": budget ", stats.budget_bytes, " B, used ",
      stats.used_bytes, " B (", stats.reserved_bytes, " B awaiting data), ",
      stats.num_waiting, " waiting for ", stats.waiting_bytes, " B");
  if (!lost_.ok()) absl::StrAppend(&text, ", lost: ", lost_.ToString());
  text += "\n";
  for (const auto& [id, entry] : entries_) {
    absl::StrAppend(&text, "  ", id.ToString(), ": ", StateName(entry->state),
                    " ", ShapeText(entry->shape), " ", entry->bytes,
                    " B, refs ", entry->refs);
    if (entry->pieces_expected > 0 && entry->state != BufferState::kReady) {
      absl::StrAppend(&text, ", pieces ", entry->pieces_written, "/",
                      entry->pieces_expected);
    }
    if (entry->writers > 0) {
      absl::StrAppend(&text, ", ", entry->writers, " being written");
    }
    if (entry->state == BufferState::kError) {
      absl::StrAppend(&text, ", ", entry->error.ToString());
    }
    text += "\n";
  }
  return text;
}

}  // namespace causeway::worker
