// tomo: the tomoserve command-line client. Everything is in RunCli (cli_common.h).
#include "client/cli/cli_common.h"
#include "transfer/allocator_tuning.h"

int main(int argc, char** argv) {
  tomo::transfer::KeepTransferBuffersInTheHeap();
  return tomo::cli::RunCli(argc, argv);
}
