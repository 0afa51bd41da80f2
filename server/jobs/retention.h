// Retention: with result_ttl > 0, finished jobs are deleted (record, then files) that long
// after they ended, by a sweep every sweep interval on a thread of its own (Start) and
// once at start-up. The records are removed from the job table at once and from the store
// in one batch; a job's files go only once its removal is durable (a crash in between
// leaves a directory without a record, which start-up removes; never a record without
// files).
//
// Thread-safe.
//
//   Retention retention(options, spool, table);
//   retention.SweepExpired();   // at start-up
//   retention.Start();          // then periodically; Stop() ends it
#pragma once

#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "server/jobs/job_manager_options.h"
#include "server/jobs/job_table.h"
#include "server/storage/spool.h"

namespace tomo::server {

class Retention {
 public:
  // Everything given must outlive it.
  Retention(const JobManagerOptions& options, const Spool& spool, JobTable& table)
      : options_(options), spool_(spool), table_(table) {}
  // Stop().
  ~Retention() { Stop(); }
  Retention(const Retention&) = delete;
  Retention& operator=(const Retention&) = delete;

  // Deletes the finished jobs that ended result_ttl ago or earlier; how many.
  size_t SweepExpired();
  // Sweeps every sweep interval until Stop() (nothing without a result_ttl).
  void Start();
  void Stop();

 private:
  void Loop();

  const JobManagerOptions& options_;
  const Spool& spool_;
  JobTable& table_;
  absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace tomo::server
