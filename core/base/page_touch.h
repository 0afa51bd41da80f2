// TouchPagesWhile: faults in the pages of memory that is about to be written (an output
// array whose pages the kernel has not mapped yet), on several threads, block by block, for
// as long as `keep_going` says so; returns the bytes touched from the start.
//
// Why: a fresh 0.5-4 GB result is mapped page by page as it is first written; when that
// first write is the copy of a device's download, the page faults (and the kernel's zeroing
// of each page) sit on the download's critical path, and several devices downloading at
// once fault in the same process at the same time. A host thread that waits for a device
// to finish computing can map the pages in that otherwise idle time instead; it stops as
// soon as the device is done (keep_going false), so the touching never delays the download.
//
// The memory must be an output: one byte per 4 KiB page is overwritten with 0 (the values
// are the caller's to write afterwards). keep_going is called between blocks on the calling
// thread.
#pragma once

#include <cstddef>
#include <functional>

namespace tomo::core {

size_t TouchPagesWhile(void* data, size_t bytes, const std::function<bool()>& keep_going);

}  // namespace tomo::core
