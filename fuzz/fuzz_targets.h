// The fuzz entry points of the input parsers and of tomod's spec validation, each taking
// arbitrary bytes:
// built into libFuzzer binaries by scripts/fuzz (clang -fsanitize=fuzzer,address, with
// TOMO_LIBFUZZER defined, which adds LLVMFuzzerTestOneInput), and into the gcc-built
// regression test tests/fuzz/fuzz_regression_test.cc, which replays fuzz/corpus/ through them
// so that CI exercises them on every build. Each returns 0 (libFuzzer's convention); a bug
// shows up as a crash, a sanitizer report, or an abort on a broken promise of the parser
// (a non-OK status that is not INVALID_ARGUMENT, or an OK result of the wrong shape).
#pragma once

#include <cstddef>
#include <cstdint>

namespace tomo::fuzz {

int FuzzDicomCtPd(const uint8_t* data, size_t size);
int FuzzTiff(const uint8_t* data, size_t size);
// The bytes as an uploaded HDF5 scan (Data Exchange or NXtomo), through libhdf5.
int FuzzHdf5Scan(const uint8_t* data, size_t size);
int FuzzRawStream(const uint8_t* data, size_t size);
// The bytes as a tomoserve.v1.JobSpec: validation and admission sizing (server/).
int FuzzJobSpec(const uint8_t* data, size_t size);
// The bytes as a Submit stream's length-delimited SubmitRequests, through JobManager's
// admission and upload (server/).
int FuzzSubmitStream(const uint8_t* data, size_t size);

}  // namespace tomo::fuzz
