#include "transfer/allocator_tuning.h"

#include <malloc.h>

namespace tomo::transfer {

void KeepTransferBuffersInTheHeap() {
  mallopt(M_TRIM_THRESHOLD, 256 << 20);
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
}

}  // namespace tomo::transfer
