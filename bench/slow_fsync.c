// libslow-fsync.so: an LD_PRELOAD shim that makes every fsync and fdatasync of the process
// take TOMO_SLOW_FSYNC_US microseconds longer (default 20000), to see what waits on one: a
// busy disk, network storage or a consumer SSD without power-loss protection fsyncs in
// milliseconds to tens of milliseconds where tmpfs or a datacentre NVMe answers at once.
//
//   TOMO_SLOW_FSYNC_US=50000 LD_PRELOAD=build/lib/libslow-fsync.so build/bin/commit-stall-bench
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>
#include <time.h>

static void Delay(void) {
  static long delay_us = -1;
  if (delay_us < 0) {
    const char* text = getenv("TOMO_SLOW_FSYNC_US");
    delay_us = text != NULL ? atol(text) : 20000;
  }
  struct timespec wait = {delay_us / 1000000, (delay_us % 1000000) * 1000};
  while (nanosleep(&wait, &wait) != 0) {
  }
}

int fsync(int fd) {
  static int (*real)(int) = NULL;
  if (real == NULL) real = (int (*)(int))dlsym(RTLD_NEXT, "fsync");
  Delay();
  return real(fd);
}

int fdatasync(int fd) {
  static int (*real)(int) = NULL;
  if (real == NULL) real = (int (*)(int))dlsym(RTLD_NEXT, "fdatasync");
  Delay();
  return real(fd);
}
