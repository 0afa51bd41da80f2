// IdleUploads: ends Submit and SubmitStripe streams that wait for their client's next
// message longer than tomod's --upload_idle_timeout, so that an upload that never sends
// upload_end (a crashed or hostile client) does not hold its job, its reservation on the
// spool and its place among --max_uploads_per_client for ever. One thread checks every
// stream a few times per timeout; the stream is cancelled (ServerContext::TryCancel), and
// its reactor, seeing reaped(), aborts the upload (the job and its files removed, its
// reservation released) and ends the call.
//
// Only the wait for the client counts: a stream tomod itself has paused (its writer queue
// full, a striped upload's stream ahead of the others) or that is committing is not idle.
//
// Thread-safe. An Entry is the reactor's; it must call Unregister before it is destroyed.
//
//   auto entry = idle.Register(context);       // in the reactor's constructor
//   entry->Waiting();  StartRead(&request_);   // each read
//   entry->Busy();                             // OnReadDone
//   if (entry->reaped()) ...                   // OnReadDone(false): why the stream ended
//   idle.Unregister(entry);                    // OnDone, before delete this
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <set>
#include <thread>

#include <grpcpp/server_context.h>
#include <grpcpp/support/server_callback.h>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace tomo::server {

class IdleUploads {
 public:
  class Entry {
   public:
    // The stream waits for the client's next message from now.
    void Waiting() { waiting_since_ns_.store(absl::GetCurrentTimeNanos()); }
    // The stream does not wait for the client (a message is being handled, tomod paused
    // it, or it is committing).
    void Busy() { waiting_since_ns_.store(0); }
    // The stream was ended for idleness.
    bool reaped() const { return reaped_.load(); }

   private:
    friend class IdleUploads;
    explicit Entry(grpc::CallbackServerContext* context) : context_(context) {}

    std::atomic<int64_t> waiting_since_ns_{0};
    std::atomic<bool> reaped_{false};
    // Held while the context is cancelled; recursive, because gRPC may run the reactor's
    // reactions (OnDone, which unregisters) on the cancelling thread.
    std::recursive_mutex mu_;
    grpc::CallbackServerContext* context_;  // null once unregistered
  };

  // timeout zero: streams are never ended (no thread).
  explicit IdleUploads(absl::Duration timeout);
  // Ends the thread.
  ~IdleUploads();
  IdleUploads(const IdleUploads&) = delete;
  IdleUploads& operator=(const IdleUploads&) = delete;

  std::shared_ptr<Entry> Register(grpc::CallbackServerContext* context);
  void Unregister(const std::shared_ptr<Entry>& entry);
  absl::Duration timeout() const { return timeout_; }

 private:
  void Loop();

  const absl::Duration timeout_;
  absl::Mutex mu_;
  std::set<std::shared_ptr<Entry>> entries_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace tomo::server
