// tomo: the tomoserve command-line client. Everything is in RunCli (cli_common.h).
#include "client/cli/cli_common.h"

int main(int argc, char** argv) { return tomo::cli::RunCli(argc, argv); }
