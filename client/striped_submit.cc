// TomoClient::SubmitStriped: one upload over N streams (tomoserve.proto, UploadStriping).
// One gRPC stream holds an upload near 2.1-2.6 GB/s on loopback whatever tomod's spool can
// write; N streams on N connections each carry every N-th unit of 1 MiB.
//
// The Submit call sends the spec with the striping, learns the job's id from tomod's
// initial metadata, then carries stripe 0 while threads send stripes 1..N-1 on SubmitStripe
// calls over channels of their own. Each unit goes as one message (a unit that spans two
// data files is joined first). upload_end, with the CRC-32 of the whole input combined from
// the units' in file order, goes only after every stripe's call ended OK. When any stream
// fails the others are cancelled; tomod then removes the job, and the first error is
// returned.
#include <algorithm>
#include <atomic>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/tomo_client.h"
#include "transfer/chunk_reader.h"

namespace tomo::client {

namespace v1 = ::tomoserve::v1;

namespace {

// tomod's initial-metadata key with a striped upload's job id (server/uploads/upload_reactors.h).
constexpr char kJobIdMetadataKey[] = "tomo-job-id";

// Reads stripe `index` of the files and calls send(offset, unit) for each whole unit, in
// order; unit_crcs[u] gets unit u's CRC-32. send returning false stops it (the call ended):
// then CANCELLED. DATA_LOSS/INTERNAL from the reader.
absl::Status SendStripe(const std::vector<std::string>& paths,
                        const std::vector<uint64_t>& file_bytes, uint64_t total, uint32_t count,
                        uint32_t index, uint64_t unit, std::vector<uint32_t>& unit_crcs,
                        const std::function<bool(uint64_t offset, std::string unit)>& send) {
  transfer::ChunkReader::Options options;
  options.chunk_bytes = unit;
  options.stripe_count = count;
  options.stripe_index = index;
  options.stripe_bytes = unit;
  absl::StatusOr<std::unique_ptr<transfer::ChunkReader>> reader =
      transfer::ChunkReader::Open(paths, 0, options);
  if (!reader.ok()) return reader.status();
  std::vector<uint64_t> file_start(file_bytes.size(), 0);
  for (size_t f = 1; f < file_bytes.size(); ++f) {
    file_start[f] = file_start[f - 1] + file_bytes[f - 1];
  }
  std::string pending;
  uint64_t pending_offset = 0;
  uint32_t pending_crc = 0;
  for (;;) {
    absl::StatusOr<std::optional<transfer::ChunkReader::Chunk>> chunk = (*reader)->Next();
    if (!chunk.ok()) return chunk.status();
    if (!chunk->has_value()) break;
    transfer::ChunkReader::Chunk& piece = **chunk;
    const uint64_t at = file_start[piece.file] + piece.offset;
    if (pending.empty()) {
      pending_offset = at;
      pending_crc = piece.crc32;
      pending = std::move(piece.bytes);
    } else {
      pending_crc = transfer::Crc32Combine(pending_crc, piece.crc32, piece.bytes.size());
      pending += piece.bytes;
    }
    const uint64_t unit_end = std::min(total, (pending_offset / unit + 1) * unit);
    if (pending_offset + pending.size() < unit_end) continue;  // the unit goes on in the next file
    unit_crcs[pending_offset / unit] = pending_crc;
    if (!send(pending_offset, std::move(pending))) {
      return absl::CancelledError("the stream ended");
    }
    pending.clear();
  }
  if (!pending.empty()) {
    return absl::DataLossError(absl::StrCat("the data changed during the upload: stripe ", index,
                                            " ended inside its unit at offset ", pending_offset));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<v1::Job> TomoClient::SubmitStriped(const v1::JobSpec& spec,
                                                  const std::vector<std::string>& data_paths,
                                                  const std::vector<uint64_t>& file_bytes,
                                                  uint32_t streams,
                                                  const ByteProgressFn& on_progress) {
  const uint64_t total = spec.input().size_bytes();
  const uint64_t unit = kUploadChunkBytes;
  grpc::ClientContext context;
  v1::SubmitResponse response;
  std::unique_ptr<grpc::ClientWriter<v1::SubmitRequest>> writer =
      stub_->Submit(&context, &response);
  v1::SubmitRequest request;
  *request.mutable_spec() = spec;
  request.mutable_striping()->set_count(streams);
  request.mutable_striping()->set_unit_bytes(unit);
  if (!writer->Write(request)) return FinishEndedSubmit(*writer, response);
  writer->WaitForInitialMetadata();
  const auto& metadata = context.GetServerInitialMetadata();
  auto id = metadata.find(kJobIdMetadataKey);
  // No id: tomod ended the call at once (a refusal, or the job of a known idempotency key).
  if (id == metadata.end()) return FinishEndedSubmit(*writer, response);
  const std::string job_id(id->second.data(), id->second.size());
  if (on_progress) on_progress(0, total);

  std::vector<uint32_t> unit_crcs((total + unit - 1) / unit, 0);
  std::atomic<uint64_t> sent{0};
  std::vector<std::unique_ptr<grpc::ClientContext>> stripe_contexts;
  for (uint32_t k = 1; k < streams; ++k) {
    stripe_contexts.push_back(std::make_unique<grpc::ClientContext>());
  }
  std::mutex mu;
  absl::Status first_error;  // the first stream's failure; the others are then cancelled
  auto fail = [&](absl::Status status) {
    std::lock_guard<std::mutex> lock(mu);
    if (!first_error.ok()) return;
    first_error = std::move(status);
    context.TryCancel();
    for (auto& stripe_context : stripe_contexts) stripe_context->TryCancel();
  };

  const std::vector<v1::Reconstruction::Stub*> stubs = DownloadStubs(static_cast<int>(streams));
  auto send_stripe = [&](uint32_t k) {
    grpc::ClientContext& call = *stripe_contexts[k - 1];
    v1::SubmitStripeResponse reply;
    std::unique_ptr<grpc::ClientWriter<v1::SubmitStripeRequest>> stripe_writer =
        stubs[k]->SubmitStripe(&call, &reply);
    v1::SubmitStripeRequest message;
    message.mutable_open()->set_job_id(job_id);
    message.mutable_open()->set_stripe_index(k);
    bool open = stripe_writer->Write(message);
    absl::Status read = absl::OkStatus();
    if (open) {
      read = SendStripe(data_paths, file_bytes, total, streams, k, unit, unit_crcs,
                        [&](uint64_t offset, std::string bytes) {
                          const uint64_t size = bytes.size();
                          message.Clear();
                          message.mutable_data()->set_offset(offset);
                          *message.mutable_data()->mutable_data() = std::move(bytes);
                          if (!stripe_writer->Write(message)) return false;
                          sent += size;
                          return true;
                        });
      if (read.ok()) stripe_writer->WritesDone();
    }
    if (!read.ok() && !absl::IsCancelled(read)) {
      fail(read);
      call.TryCancel();
    }
    grpc::Status status = stripe_writer->Finish();
    if (!status.ok()) {
      fail(FromGrpcStatus(status));
    } else if (!read.ok()) {
      fail(read);
    }
  };
  std::vector<std::thread> threads;
  for (uint32_t k = 1; k < streams; ++k) threads.emplace_back(send_stripe, k);

  absl::Status read = SendStripe(data_paths, file_bytes, total, streams, 0, unit, unit_crcs,
                                 [&](uint64_t /*offset*/, std::string bytes) {
                                   const uint64_t size = bytes.size();
                                   request.Clear();
                                   *request.mutable_data() = std::move(bytes);
                                   if (!writer->Write(request)) return false;
                                   sent += size;
                                   if (on_progress) on_progress(sent.load(), total);
                                   return true;
                                 });
  if (absl::IsCancelled(read)) {
    // Stripe 0's call ended: tomod's reason, unless another stream failed first.
    absl::StatusOr<v1::Job> ended = FinishEndedSubmit(*writer, response);
    fail(ended.ok() ? absl::UnavailableError("tomod ended the upload early") : ended.status());
  } else if (!read.ok()) {
    fail(read);
  }
  for (std::thread& thread : threads) thread.join();
  {
    std::lock_guard<std::mutex> lock(mu);
    if (!first_error.ok()) {
      if (!absl::IsCancelled(read)) writer->Finish();
      return first_error;
    }
  }
  uint32_t crc = 0;
  for (size_t u = 0; u < unit_crcs.size(); ++u) {
    const uint64_t size = std::min(unit, total - u * unit);
    crc = u == 0 ? unit_crcs[0] : transfer::Crc32Combine(crc, unit_crcs[u], size);
  }
  if (on_progress) on_progress(total, total);
  request.Clear();
  request.mutable_upload_end()->set_total_bytes(total);
  request.mutable_upload_end()->set_crc32(crc);
  if (!writer->Write(request)) return FinishEndedSubmit(*writer, response);
  writer->WritesDone();
  grpc::Status status = writer->Finish();
  if (!status.ok()) return FromGrpcStatus(status);
  return response.job();
}

}  // namespace tomo::client
