// The commands that talk to tomod: submit, watch, status, list, fetch, cancel, delete,
// info. `submit --wait` fetches the raw volume while tomod writes it
// (TomoClient::WatchAndFetch), the other results once the job has succeeded.
#include <algorithm>
#include <filesystem>
#include <iostream>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "client/cli/cli_common.h"
#include "client/cli/output_commands.h"
#include "client/cli/progress_bar.h"
#include "client/health_check.h"
#include "client/cli/submit_interrupts.h"
#include "client/job_spec_json.h"
#include "client/tomo_client.h"
#include "runner/job_execution.h"

namespace tomo::cli {
namespace {

namespace fs = std::filesystem;
namespace v1 = ::tomoserve::v1;
using client::TomoClient;

std::string ProgressLabel(v1::JobState state, const v1::Progress& progress) {
  std::string label = client::JobStateName(state, /*lower=*/true);
  if (client::IsFinal(state)) return label;
  // Iteration k/n first: a narrow terminal cuts the label's end, never the count.
  if (progress.iterations_total() > 1) {
    absl::StrAppend(&label, " ", progress.iteration(), "/", progress.iterations_total());
  }
  if (!progress.stage().empty()) absl::StrAppend(&label, " ", progress.stage());
  return label;
}

// "queued, position 2 of 5": the job's place among the queued jobs tomod lists, in the
// scheduler's order (higher priority first, then older first); "" when it cannot be told.
std::string QueuePosition(TomoClient& client, const std::string& job_id) {
  absl::StatusOr<std::vector<v1::Job>> queued = client.ListJobs({v1::JOB_STATE_QUEUED});
  if (!queued.ok()) return "";
  std::stable_sort(queued->begin(), queued->end(), [](const v1::Job& a, const v1::Job& b) {
    return a.spec().priority() > b.spec().priority();
  });
  for (size_t i = 0; i < queued->size(); ++i) {
    if ((*queued)[i].id() == job_id) {
      return absl::StrCat("queued, position ", i + 1, " of ", queued->size());
    }
  }
  return "";
}

// The label of a job event, with the queue position while QUEUED.
std::string EventLabel(TomoClient& client, const std::string& job_id, const v1::JobEvent& event) {
  if (event.state() == v1::JOB_STATE_QUEUED) {
    std::string position = QueuePosition(client, job_id);
    if (!position.empty()) return position;
  }
  return ProgressLabel(event.state(), event.progress());
}

std::string PercentText(double fraction) {
  return absl::StrFormat("%5.1f%%", 100.0 * std::clamp(fraction, 0.0, 1.0));
}

// The job's end after its watch stream closed: 0 for SUCCEEDED, else the one-line report.
int ReportFinalState(const std::string& what, const v1::Job& job) {
  switch (job.state()) {
    case v1::JOB_STATE_SUCCEEDED:
      return kExitOk;
    case v1::JOB_STATE_FAILED:
      return Fail(what, absl::StrCat("job ", job.id(), " FAILED",
                                     job.error().empty() ? "" : ": ", job.error()),
                  kExitJobFailed);
    case v1::JOB_STATE_CANCELLED:
      return Fail(what, absl::StrCat("job ", job.id(), " was CANCELLED"), kExitJobFailed);
    default:
      return Fail(what,
                  absl::StrCat("the watch of job ", job.id(), " ended while it is ",
                               client::JobStateName(job.state())),
                  kExitError);
  }
}

// Watches job_id until it ends, drawing the bar; then returns the job as it ended.
absl::StatusOr<v1::Job> WatchToEnd(TomoClient& client, const std::string& job_id,
                                   ProgressBar& bar) {
  absl::Status watched = client.Watch(job_id, [&](const v1::JobEvent& event) {
    bar.Update(event.progress().fraction(), EventLabel(client, job_id, event));
  });
  if (!watched.ok()) return watched;
  absl::StatusOr<v1::Job> job = client.GetJob(job_id);
  if (job.ok()) {
    bar.Update(job->progress().fraction(), ProgressLabel(job->state(), job->progress()));
  }
  bar.Finish();
  return job;
}

// Downloads results into out_dir (created), one line per path on stdout; the result
// named fetched (if any) is in out_dir already and only listed.
int FetchInto(TomoClient& client, const GlobalOptions& global, const v1::Job& job,
              const std::vector<std::string>& names, const fs::path& out_dir, bool resume,
              const std::string& what, const std::string& fetched = "") {
  std::error_code error;
  fs::create_directories(out_dir, error);
  if (error) {
    return Fail(what, absl::StrCat("cannot create ", out_dir.string(), ": ", error.message()),
                kExitError);
  }
  for (const std::string& name : names) {
    fs::path path = out_dir / name;
    if (name == fetched) {
      PrintPath(global, path.string());
      continue;
    }
    ProgressBar bar(ProgressWanted(global));
    uint64_t expected = 0;
    v1::OutputFormat format = v1::OUTPUT_FORMAT_UNSPECIFIED;
    for (const v1::ResultFile& result : job.results()) {
      if (result.name() == name) {
        expected = result.size_bytes();
        format = result.format();
      }
    }
    absl::StatusOr<v1::ResultFile> file = client.Fetch(
        job.id(), name, path.string(), resume, [&](uint64_t done, uint64_t total) {
          bar.UpdateBytes(done, total == 0 ? expected : total, absl::StrCat("fetching ", name));
        });
    bar.Finish();
    if (!file.ok()) {
      return FailRpc(global, absl::StrCat(what, " ", job.id(), "/", name), file.status());
    }
    if (format == v1::OUTPUT_FORMAT_DICOM_CT_SERIES) {
      // As `tomo fetch --format dicom`: a folder of .dcm files rather than the tar.
      absl::StatusOr<std::string> folder = UnpackDicomSeries(path.string(), out_dir.string());
      if (!folder.ok()) return Fail(absl::StrCat(what, " ", job.id(), "/", name), folder.status());
      PrintPath(global, *folder);
      continue;
    }
    PrintPath(global, path.string());
  }
  std::cout.flush();
  return kExitOk;
}

std::vector<std::string> ResultNames(const v1::Job& job) {
  std::vector<std::string> names;
  for (const v1::ResultFile& result : job.results()) names.push_back(result.name());
  return names;
}

// ----------------------------------------------------------------------------- submit

struct SubmitArgs {
  std::string spec_path;
  std::vector<std::string> data_paths;
  bool wait = false;
  std::string out;
  int priority = 0;
  bool priority_set = false;
  std::string name;
  std::string idempotency_key;
  int download_streams = 0;  // ClientOptions::download_streams (0: automatic)
  int upload_streams = 0;    // ClientOptions::upload_streams (0: automatic)
  std::string on_interrupt = "ask";  // SubmitInterrupts::Mode
  OutputFlags outputs;               // --format, --water-attenuation
};

// ClientOptions with --download_streams (and --upload_streams).
client::ClientOptions DownloadOptions(int download_streams, int upload_streams = 0) {
  client::ClientOptions options;
  options.download_streams = download_streams;
  options.upload_streams = upload_streams;
  return options;
}

// 128 random bits in hex: a key no other invocation will pick.
std::string NewIdempotencyKey() {
  std::random_device random;
  std::string key;
  for (int i = 0; i < 4; ++i) absl::StrAppend(&key, absl::Hex(random(), absl::kZeroPad8));
  return key;
}

int RunSubmit(const GlobalOptions& global, const SubmitArgs& args) {
  absl::StatusOr<v1::JobSpec> spec = client::ReadJobSpecFile(args.spec_path);
  if (!spec.ok()) return Fail("submit", spec.status());
  if (args.priority_set) spec->set_priority(args.priority);
  if (!args.name.empty()) spec->set_name(args.name);
  if (absl::Status applied = ApplyOutputFlags(args.outputs, &*spec); !applied.ok()) {
    return Fail("submit: usage", applied.message(), kExitUsage);
  }
  // One key per invocation (unless given, or in the spec file): should the Submit be
  // retried, tomod answers with the job it already has instead of making a second one.
  if (!args.idempotency_key.empty()) {
    spec->set_idempotency_key(args.idempotency_key);
  } else if (spec->idempotency_key().empty()) {
    spec->set_idempotency_key(NewIdempotencyKey());
  }
  std::vector<std::string> data_paths = args.data_paths;
  if (absl::Status sized = PrepareInputFiles(&data_paths, &*spec); !sized.ok()) {
    return Fail("submit", sized);
  }

  SubmitInterrupts::Mode interrupt_mode;
  if (!ParseInterruptMode(args.on_interrupt, &interrupt_mode)) {
    return Fail("submit: usage",
                absl::StrCat("--on-interrupt ", args.on_interrupt, ": one of ask, cancel, keep"),
                kExitUsage);
  }
  // Before the client: its threads must start with SIGINT blocked (submit_interrupts.h).
  SubmitInterrupts interrupts(
      interrupt_mode, [&global](const std::string& job_id) -> absl::StatusOr<std::string> {
        TomoClient canceller(global.server, ClientOptionsFor(global));
        absl::StatusOr<v1::Job> cancelled = canceller.Cancel(job_id);
        if (!cancelled.ok()) return cancelled.status();
        return client::JobStateName(cancelled->state());
      });
  TomoClient client(global.server,
                    ClientOptionsFor(global, DownloadOptions(args.download_streams,
                                                             args.upload_streams)));
  ProgressBar bar(ProgressWanted(global));
  absl::StatusOr<v1::Job> job;
  // A connection lost mid-upload (tomod restarting, say) is retried a few times: the key
  // makes tomod answer with the job it may already have committed. A tomod never reached
  // (no byte sent yet) is reported at once, as the other commands do.
  constexpr int kSubmitAttempts = 3;
  bool connected = false;
  for (int attempt = 1; attempt <= kSubmitAttempts; ++attempt) {
    job = client.Submit(*spec, data_paths, [&](uint64_t sent, uint64_t total) {
      connected |= sent > 0;
      if (sent == total) interrupts.UploadDone();
      bar.UpdateBytes(sent, total, "uploading");
    });
    if (job.ok() || !absl::IsUnavailable(job.status()) || !connected ||
        attempt == kSubmitAttempts) {
      break;
    }
    absl::SleepFor(absl::Seconds(attempt));
  }
  bar.Finish();
  if (!job.ok()) {
    interrupts.Failed();
    return FailRpc(global, "submit", job.status());
  }
  if (global.json) {
    JsonField("jobId", job->id());
    JsonField("state", client::JobStateName(job->state()));
  } else {
    std::cout << job->id() << std::endl;
  }
  interrupts.Committed(job->id());
  if (!args.wait) return kExitOk;

  const fs::path out = args.out.empty() ? fs::path(".") / job->id() : fs::path(args.out);
  // The raw volume (when asked for; no outputs means raw) streams while tomod writes it.
  const std::string raw_name = server::ResultFileName(v1::OUTPUT_FORMAT_RAW_FLOAT32);
  const bool raw_wanted =
      spec->outputs().empty() || std::find(spec->outputs().begin(), spec->outputs().end(),
                                           v1::OUTPUT_FORMAT_RAW_FLOAT32) != spec->outputs().end();
  std::error_code error;
  const bool created = raw_wanted && fs::create_directories(out, error);
  absl::StatusOr<v1::Job> ended;
  if (raw_wanted && !error) {
    absl::StatusOr<client::WatchedFetch> watched = client.WatchAndFetch(
        job->id(), raw_name, (out / raw_name).string(), [&](const v1::JobEvent& event) {
          if (interrupts.prompting()) return;
          bar.Update(event.progress().fraction(), EventLabel(client, job->id(), event));
        });
    bar.Finish();
    if (!watched.ok()) {
      return FailRpc(global, absl::StrCat("submit: watch and fetch ", job->id(), "/", raw_name),
                     watched.status());
    }
    ended = std::move(watched->job);
  } else {
    ended = WatchToEnd(client, job->id(), bar);  // FetchInto names an out_dir error
  }
  if (!ended.ok()) {
    return FailRpc(global, absl::StrCat("submit: watch ", job->id()), ended.status());
  }
  JsonField("state", client::JobStateName(ended->state()));
  if (int code = ReportFinalState("submit", *ended); code != kExitOk) {
    if (created) fs::remove(out, error);  // made for the raw volume; empty, as nothing came
    return code;
  }
  return FetchInto(client, global, *ended, ResultNames(*ended), out, /*resume=*/true,
                   "submit: fetch", raw_wanted && !error ? raw_name : "");
}

// ----------------------------------------------------------------------------- watch

int RunWatch(const GlobalOptions& global, const std::string& job_id, bool as_bar) {
  TomoClient client(global.server, ClientOptionsFor(global));
  const std::string what = absl::StrCat("watch ", job_id);
  if (as_bar) {
    ProgressBar bar(global.quiet ? ProgressStyle::kNone : ProgressStyle::kBar);
    absl::StatusOr<v1::Job> ended = WatchToEnd(client, job_id, bar);
    if (!ended.ok()) return FailRpc(global, what, ended.status());
    return ReportFinalState(what, *ended);
  }
  if (global.json) JsonPrinted();
  absl::Status watched = client.Watch(job_id, [&](const v1::JobEvent& event) {
    if (global.json) {
      std::cout << client::MessageToJsonLine(event) << std::endl;
      return;
    }
    std::string line = absl::StrFormat(
        "%s  %-9s %s  %s", FormatTime(event.time(), /*milliseconds=*/true), client::JobStateName(event.state()),
        PercentText(event.progress().fraction()), event.progress().stage());
    if (event.progress().iterations_total() > 0) {
      absl::StrAppend(&line, absl::StrFormat("  iteration %d/%d", event.progress().iteration(),
                                             event.progress().iterations_total()));
    }
    if (event.progress().has_cost()) {
      absl::StrAppend(&line, absl::StrFormat("  cost %.6g", event.progress().cost()));
    }
    if (!event.message().empty()) absl::StrAppend(&line, "  ", OneLine(event.message()));
    std::cout << line << std::endl;
  });
  if (!watched.ok()) return FailRpc(global, what, watched);
  absl::StatusOr<v1::Job> job = client.GetJob(job_id);
  if (!job.ok()) return FailRpc(global, what, job.status());
  return ReportFinalState(what, *job);
}

// ----------------------------------------------------------------------------- status

void PrintJob(const v1::Job& job) {
  const v1::JobSpec& spec = job.spec();
  auto row = [](const char* key, const std::string& value) {
    std::cout << absl::StrFormat("%-11s%s\n", key, value);
  };
  row("job", job.id());
  if (!spec.name().empty()) row("name", spec.name());
  row("state", client::JobStateName(job.state()));
  std::string progress = absl::StrCat(PercentText(job.progress().fraction()));
  if (!job.progress().stage().empty()) absl::StrAppend(&progress, "  ", job.progress().stage());
  if (job.progress().iterations_total() > 0) {
    absl::StrAppend(&progress, "  iteration ", job.progress().iteration(), "/",
                    job.progress().iterations_total());
  }
  row("progress", progress);
  if (!job.error().empty()) row("error", OneLine(job.error()));
  row("priority", absl::StrCat(spec.priority()));
  // Every device of the run (several with tomod's --multi_device_jobs); an older tomod
  // sends only the first.
  const std::string devices = job.devices().empty() ? job.device()
                                                    : absl::StrJoin(job.devices(), ", ");
  row(job.devices_size() > 1 ? "devices" : "device", devices.empty() ? "-" : devices);
  row("created", FormatTime(job.created()));
  row("started", FormatTime(job.started()));
  row("finished", FormatTime(job.finished()));
  row("input", HumanBytes(job.input_bytes()));
  row("algorithm", DescribeAlgorithm(spec.algorithm()));
  row("geometry", DescribeGeometry(spec.geometry()));
  const v1::Volume& volume = spec.volume();
  row("volume", absl::StrFormat("%d x %d x %d voxels of %g x %g x %g mm", volume.size().x(),
                                volume.size().y(), volume.size().z(),
                                volume.voxel_size_mm().x(), volume.voxel_size_mm().y(),
                                volume.voxel_size_mm().z()));
  for (const v1::ResultFile& result : job.results()) {
    row("result", absl::StrFormat("%s  %s  crc32 %08x", result.name(),
                                  HumanBytes(result.size_bytes()), result.crc32()));
  }
}

int RunStatus(const GlobalOptions& global, const std::string& job_id) {
  const bool json = global.json;
  TomoClient client(global.server, ClientOptionsFor(global));
  absl::StatusOr<v1::Job> job = client.GetJob(job_id);
  if (!job.ok()) return FailRpc(global, absl::StrCat("status ", job_id), job.status());
  if (json) {
    std::cout << client::MessageToJson(*job);
    JsonPrinted();
  } else {
    PrintJob(*job);
  }
  return kExitOk;
}

// ----------------------------------------------------------------------------- list

int RunList(const GlobalOptions& global, const std::vector<std::string>& state_names) {
  const bool json = global.json;
  std::vector<v1::JobState> states;
  for (const std::string& name : state_names) {
    for (absl::string_view part : absl::StrSplit(name, ',', absl::SkipWhitespace())) {
      absl::StatusOr<v1::JobState> state = client::ParseJobState(std::string(part));
      if (!state.ok()) return Fail("list: usage", state.status().message(), kExitUsage);
      states.push_back(*state);
    }
  }
  TomoClient client(global.server, ClientOptionsFor(global));
  absl::StatusOr<std::vector<v1::Job>> jobs = client.ListJobs(states);
  if (!jobs.ok()) return FailRpc(global, "list", jobs.status());
  if (json) {
    v1::ListJobsResponse response;
    for (const v1::Job& job : *jobs) *response.add_jobs() = job;
    std::cout << client::MessageToJson(response);
    JsonPrinted();
    return kExitOk;
  }
  if (jobs->empty()) return kExitOk;
  size_t id_width = 2;
  for (const v1::Job& job : *jobs) id_width = std::max(id_width, job.id().size());
  std::cout << absl::StrFormat("%-*s  %-9s  %6s  %-20s  %s\n", id_width, "ID", "STATE",
                               "DONE", "CREATED", "NAME");
  for (const v1::Job& job : *jobs) {
    std::cout << absl::StrFormat("%-*s  %-9s  %6s  %-20s  %s\n", id_width, job.id(),
                                 client::JobStateName(job.state()),
                                 PercentText(job.progress().fraction()),
                                 FormatTime(job.created()), job.spec().name());
  }
  return kExitOk;
}

// ----------------------------------------------------------------------------- fetch

int RunFetch(const GlobalOptions& global, const std::string& job_id, const std::string& name,
             const std::string& format_name, const std::string& out, bool no_resume,
             int download_streams) {
  const std::string what = absl::StrCat("fetch ", job_id);
  TomoClient client(global.server, ClientOptionsFor(global, DownloadOptions(download_streams)));
  absl::StatusOr<v1::Job> job = client.GetJob(job_id);
  if (!job.ok()) return FailRpc(global, what, job.status());
  std::vector<std::string> names = ResultNames(*job);
  if (names.empty()) {
    return Fail(what,
                absl::StrCat("job ", job_id, " has no results (it is ",
                             client::JobStateName(job->state()), ")"),
                job->state() == v1::JOB_STATE_FAILED || job->state() == v1::JOB_STATE_CANCELLED
                    ? kExitJobFailed
                    : kExitError);
  }
  if (!format_name.empty()) {
    // --format: every result of that format into the directory --out; a DICOM series
    // (volume_dicom.tar) is unpacked there into volume_dicom/CT*.dcm.
    absl::StatusOr<v1::OutputFormat> format = ParseOutputFormatName(format_name);
    if (!format.ok()) return Fail("fetch: usage", format.status().message(), kExitUsage);
    if (!name.empty()) return Fail("fetch: usage", "give --name or --format, not both", kExitUsage);
    std::vector<std::string> of_format;
    for (const v1::ResultFile& result : job->results()) {
      if (result.format() == *format) of_format.push_back(result.name());
    }
    if (of_format.empty()) {
      return Fail(what,
                  absl::StrCat("job ", job_id, " has no ", format_name, " result (",
                               v1::OutputFormat_Name(*format), "); it has: ",
                               absl::StrJoin(names, ", ")),
                  kExitNotFound);
    }
    const fs::path out_dir = out.empty() ? fs::path(".") / job_id : fs::path(out);
    if (*format != v1::OUTPUT_FORMAT_DICOM_CT_SERIES) {
      return FetchInto(client, global, *job, of_format, out_dir, !no_resume, "fetch");
    }
    std::error_code error;
    fs::create_directories(out_dir, error);
    for (const std::string& tar_name : of_format) {
      const fs::path tar_path = out_dir / tar_name;
      ProgressBar bar(ProgressWanted(global));
      absl::StatusOr<v1::ResultFile> file = client.Fetch(
          job_id, tar_name, tar_path.string(), !no_resume, [&](uint64_t done, uint64_t total) {
            bar.UpdateBytes(done, total, absl::StrCat("fetching ", tar_name));
          });
      bar.Finish();
      if (!file.ok()) return FailRpc(global, absl::StrCat(what, "/", tar_name), file.status());
      absl::StatusOr<std::string> folder = UnpackDicomSeries(tar_path.string(), out_dir.string());
      if (!folder.ok()) return Fail(absl::StrCat(what, "/", tar_name), folder.status());
      PrintPath(global, *folder);
    }
    return kExitOk;
  }
  if (!name.empty()) {
    if (std::find(names.begin(), names.end(), name) == names.end()) {
      return Fail(what,
                  absl::StrCat("job ", job_id, " has no result named \"", name,
                               "\"; it has: ", absl::StrJoin(names, ", ")),
                  kExitNotFound);
    }
    names = {name};
  }
  fs::path out_path = out.empty() ? fs::path(".") / job_id : fs::path(out);
  std::error_code error;
  const bool is_dir = name.empty() || (!out.empty() && out.back() == '/') ||
                      fs::is_directory(out_path, error);
  if (is_dir) return FetchInto(client, global, *job, names, out_path, !no_resume, "fetch");

  // One result into a file.
  if (out_path.has_parent_path()) fs::create_directories(out_path.parent_path(), error);
  ProgressBar bar(ProgressWanted(global));
  uint64_t expected = 0;
  for (const v1::ResultFile& result : job->results()) {
    if (result.name() == name) expected = result.size_bytes();
  }
  absl::StatusOr<v1::ResultFile> file = client.Fetch(
      job_id, name, out_path.string(), !no_resume, [&](uint64_t done, uint64_t total) {
        bar.UpdateBytes(done, total == 0 ? expected : total, absl::StrCat("fetching ", name));
      });
  bar.Finish();
  if (!file.ok()) return FailRpc(global, absl::StrCat(what, "/", name), file.status());
  PrintPath(global, out_path.string());
  return kExitOk;
}

// ----------------------------------------------------------------------------- cancel, delete

int RunCancel(const GlobalOptions& global, const std::string& job_id, bool wait) {
  TomoClient client(global.server, ClientOptionsFor(global));
  absl::StatusOr<v1::Job> job = client.Cancel(job_id);
  if (!job.ok()) return FailRpc(global, absl::StrCat("cancel ", job_id), job.status());
  if (wait && !client::IsFinal(job->state())) {
    // A running job stops at its next step (between iterations, chunks or blocks).
    absl::Status watched = client.Watch(job_id, [](const v1::JobEvent&) {});
    if (!watched.ok()) return FailRpc(global, absl::StrCat("cancel ", job_id), watched);
    job = client.GetJob(job_id);
    if (!job.ok()) return FailRpc(global, absl::StrCat("cancel ", job_id), job.status());
  }
  if (global.json) {
    JsonField("jobId", job->id());
    JsonField("state", client::JobStateName(job->state()));
    return kExitOk;
  }
  std::cout << job->id() << " " << client::JobStateName(job->state());
  if (!client::IsFinal(job->state())) {
    std::cout << " (cancel asked: it stops at its next step; --wait waits for that)";
  }
  std::cout << std::endl;
  return kExitOk;
}

int RunDelete(const GlobalOptions& global, const std::string& job_id) {
  TomoClient client(global.server, ClientOptionsFor(global));
  absl::Status deleted = client.Delete(job_id);
  if (!deleted.ok()) return FailRpc(global, absl::StrCat("delete ", job_id), deleted);
  if (global.json) {
    JsonField("jobId", job_id);
    JsonField("deleted", true);
    return kExitOk;
  }
  std::cout << job_id << " deleted" << std::endl;
  return kExitOk;
}

// ----------------------------------------------------------------------------- info

int RunInfo(const GlobalOptions& global) {
  const bool json = global.json;
  TomoClient client(global.server, ClientOptionsFor(global));
  absl::StatusOr<v1::ServerInfo> info = client.GetServerInfo();
  if (!info.ok()) return FailRpc(global, "info", info.status());
  if (json) {
    std::cout << client::MessageToJson(*info);
    JsonPrinted();
    return kExitOk;
  }
  auto row = [](const char* key, const std::string& value) {
    std::cout << absl::StrFormat("%-11s%s\n", key, value);
  };
  row("server", global.server);
  row("version", info->version());
  for (const v1::Device& device : info->devices()) {
    std::string text = absl::StrCat(device.id(), "  ", device.name());
    if (device.memory_total_bytes() > 0) {
      absl::StrAppend(&text, "  ", HumanBytes(device.memory_free_bytes()), " free of ",
                      HumanBytes(device.memory_total_bytes()));
    }
    row("device", text);
  }
  row("algorithms", absl::StrJoin(info->algorithms(), ", "));
  const v1::Limits& limits = info->limits();
  // One limit a line, named as tomod's flag that sets it, so that a refusal's message
  // ("... (--max_voxels)") can be looked up here.
  auto limit = [&row](const char* flag, const std::string& value) {
    const std::string name = absl::StrFormat("%-22s", flag);
    row("limits", absl::StrCat(name, name.back() == ' ' ? "" : " ", value));
  };
  auto or_none = [](uint64_t value, const std::string& text) {
    return value == 0 ? std::string("none") : text;
  };
  limit("--max_upload_bytes", HumanBytes(limits.max_upload_bytes()));
  limit("--max_voxels", absl::StrCat(limits.max_voxels()));
  limit("--max_views", absl::StrCat(limits.max_views()));
  limit("--max_iterations", absl::StrCat(limits.max_iterations()));
  limit("--max_queue_length", absl::StrCat(limits.max_queue_length()));
  limit("--max_jobs_per_client",
        or_none(limits.max_jobs_per_client(), absl::StrCat(limits.max_jobs_per_client())));
  limit("--tenant_max_unfinished_jobs",
        or_none(limits.tenant_max_unfinished_jobs(),
                absl::StrCat(limits.tenant_max_unfinished_jobs())));
  limit("--tenant_max_spool_bytes",
        or_none(limits.tenant_max_spool_bytes(), HumanBytes(limits.tenant_max_spool_bytes())));
  limit("--max_spool_bytes",
        or_none(limits.max_spool_bytes(),
                absl::StrCat(HumanBytes(limits.max_spool_bytes()), " (",
                             HumanBytes(info->spool_used_bytes()), " in use)")));
  limit("--memory_budget_bytes",
        or_none(limits.memory_budget_bytes(), HumanBytes(limits.memory_budget_bytes())));
  limit("--max_attempts", absl::StrCat(limits.max_attempts()));
  const int64_t ttl_seconds = limits.result_ttl().seconds();
  limit("--result_ttl",
        ttl_seconds == 0 && limits.result_ttl().nanos() == 0
            ? std::string("none (kept until deleted)")
            : absl::FormatDuration(absl::Seconds(ttl_seconds) +
                                   absl::Nanoseconds(limits.result_ttl().nanos())));
  return kExitOk;
}

// ----------------------------------------------------------------------------- health

// grpc.health.v1 Check, which tomod answers without a token: what container health checks
// and probes run. Exit 0 and "SERVING" only when the service serves.
int RunHealth(const GlobalOptions& global, const std::string& service, double timeout_seconds) {
  absl::StatusOr<client::ServingStatus> status =
      client::CheckHealth(client::MakeChannel(global.server, ClientOptionsFor(global)), service,
                          absl::Seconds(timeout_seconds));
  const std::string what =
      service.empty() ? std::string("health") : absl::StrCat("health of ", service);
  if (!status.ok()) return FailRpc(global, what, status.status());
  if (*status != client::ServingStatus::kServing) {
    return Fail(what, absl::StrCat(global.server, " is ", client::ServingStatusName(*status)),
                kExitError);
  }
  std::cout << client::ServingStatusName(*status) << std::endl;
  return kExitOk;
}

}  // namespace

void AddJobCommands(CLI::App& app, const GlobalOptions& global, std::vector<Command>& commands) {
  const GlobalOptions* g = &global;

  {
    auto args = std::make_shared<SubmitArgs>();
    CLI::App* sub = app.add_subcommand(
        "submit", "Upload a job (spec + data) to tomod and print its id; --wait also shows "
                  "its progress and fetches the results.");
    sub->add_option("--spec", args->spec_path, "JobSpec JSON file")->required();
    sub->add_option("--data", args->data_paths,
                    "projection data file(s) or directories (a DICOM-CT-PD series, a TIFF "
                    "stack: their files sorted by name), uploaded back to back in order")
        ->required();
    sub->add_flag("--wait", args->wait,
                  "wait for the job, then fetch every result into --out");
    sub->add_option("--out", args->out, "with --wait: result directory (default ./<job id>)");
    sub->add_option_function<int>(
        "--priority",
        [args](const int& p) {
          args->priority = p;
          args->priority_set = true;
        },
        "overrides the spec's priority (higher runs first, -100..100)");
    sub->add_option("--name", args->name, "overrides the spec's name");
    AddOutputFlags(sub, &args->outputs);
    sub->add_option("--idempotency-key", args->idempotency_key,
                    "submitting again with the same key returns the same job instead of a "
                    "new one (at most 256 bytes; default: the spec's, else a fresh random "
                    "key)");
    sub->add_option("--download_streams,--download-streams", args->download_streams,
                    "with --wait: download each result as this many striped streams, each on "
                    "its own connection (0..16; default 0: 3 into tmpfs, else 1)")
        ->check(CLI::Range(0, client::kMaxDownloadStreams));
    sub->add_option("--on-interrupt", args->on_interrupt,
                    "what Ctrl-C does once the job is queued (its id and how to watch or "
                    "cancel it are printed first): ask (in a terminal, else keep), cancel "
                    "the job, or keep it running. Exits 130")
        ->capture_default_str();
    sub->add_option("--upload_streams,--upload-streams", args->upload_streams,
                    "upload inputs of 64 MiB or more as this many striped streams, each on "
                    "its own connection (0..16; default 0: 3, or fewer if tomod takes fewer)")
        ->check(CLI::Range(0, client::kMaxUploadStreams));
    commands.push_back({sub, [g, args] { return RunSubmit(*g, *args); }});
  }
  {
    auto id = std::make_shared<std::string>();
    auto bar = std::make_shared<bool>(false);
    CLI::App* sub = app.add_subcommand(
        "watch", "Follow a job's events until it ends: one line per event (--json: one JobEvent "
                 "a line; or --bar). Exits 3 when the job failed or was cancelled.");
    sub->add_option("id", *id, "job id")->required();
    sub->add_flag("--bar", *bar, "a progress bar on stderr instead of event lines");
    commands.push_back({sub, [g, id, bar] { return RunWatch(*g, *id, *bar); }});
  }
  {
    auto id = std::make_shared<std::string>();
    CLI::App* sub = app.add_subcommand("status", "Show one job (--json: the Job message).");
    sub->add_option("id", *id, "job id")->required();
    commands.push_back({sub, [g, id] { return RunStatus(*g, *id); }});
  }
  {
    auto states = std::make_shared<std::vector<std::string>>();
    CLI::App* sub = app.add_subcommand(
        "list", "List jobs, oldest first (--json: a ListJobsResponse).");
    sub->add_option("--state", *states,
                    "only jobs in these states, comma-separated: uploading, queued, running, "
                    "succeeded, failed, cancelled");
    commands.push_back({sub, [g, states] { return RunList(*g, *states); }});
  }
  {
    struct FetchArgs {
      std::string id, name, format, out;
      bool no_resume = false;
      int download_streams = 0;  // automatic
    };
    auto args = std::make_shared<FetchArgs>();
    CLI::App* sub = app.add_subcommand(
        "fetch", "Download results, resuming a partial download (<file>.partial). Without "
                 "--name every result goes into the directory --out; with --name, --out is "
                 "a file unless it is a directory or ends in '/'.");
    sub->add_option("id", args->id, "job id")->required();
    sub->add_option("--name", args->name, "one result, e.g. volume.raw");
    sub->add_option("--format", args->format,
                    absl::StrCat("every result of one output format into the directory --out: ",
                                 OutputFormatNamesText(),
                                 " (dicom: unpacked into a folder of .dcm files)"));
    sub->add_option("--out", args->out, "directory or file (default ./<job id>/)");
    sub->add_flag("--no-resume", args->no_resume, "start over even if a partial file exists");
    sub->add_option("--download_streams,--download-streams", args->download_streams,
                    "download each result as this many striped streams, each on its own "
                    "connection (0..16; default 0: 3 into tmpfs, else 1)")
        ->check(CLI::Range(0, client::kMaxDownloadStreams));
    commands.push_back(
        {sub, [g, args] {
           return RunFetch(*g, args->id, args->name, args->format, args->out, args->no_resume,
                           args->download_streams);
         }});
  }
  {
    auto id = std::make_shared<std::string>();
    auto wait = std::make_shared<bool>(false);
    CLI::App* sub = app.add_subcommand(
        "cancel", "Cancel a job: a queued job at once, a running one at its next step.");
    sub->add_option("id", *id, "job id")->required();
    sub->add_flag("--wait", *wait, "wait until the job has stopped");
    commands.push_back({sub, [g, id, wait] { return RunCancel(*g, *id, *wait); }});
  }
  {
    auto id = std::make_shared<std::string>();
    CLI::App* sub = app.add_subcommand("delete", "Remove a finished job and its files.");
    sub->add_option("id", *id, "job id")->required();
    commands.push_back({sub, [g, id] { return RunDelete(*g, *id); }});
  }
  {
    CLI::App* sub = app.add_subcommand(
        "info", "Show tomod's version, devices, algorithms and limits (--json: ServerInfo).");
    commands.push_back({sub, [g] { return RunInfo(*g); }});
  }
  {
    auto service = std::make_shared<std::string>();
    auto timeout = std::make_shared<double>(5.0);
    CLI::App* sub = app.add_subcommand(
        "health",
        "Ask tomod's gRPC health service (no token needed) whether it serves: "
        "prints SERVING and exits 0, else exits 1 (NOT_SERVING, e.g. draining) or "
        "6 (unreachable).");
    sub->add_option("--service", *service,
                    "a part of tomod instead of the whole server, e.g. "
                    "tomoserve.v1.Reconstruction.admission (NOT_SERVING while the spool is "
                    "short of space)");
    sub->add_option("--timeout", *timeout, "seconds to wait for the answer")
        ->check(CLI::Range(0.1, 600.0))
        ->capture_default_str();
    commands.push_back({sub, [g, service, timeout] { return RunHealth(*g, *service, *timeout); }});
  }
}

}  // namespace tomo::cli
