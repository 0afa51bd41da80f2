// PageLockReusedBlock: page-locks the large-array block (core/data/host_block_pool.h) that
// a device's output lands in, so that its downloads go straight into it instead of through
// the staging buffers and the host's copy out of them (at 512^3 on two devices at once
// that copy took 15-24 ms each: bench/NOTES.md).
//
// A block is locked on its second array or later, and stays so until the pool really frees
// it (the registration is attached to the block): a service that reconstructs one volume
// size after another pays the registration (about 30 ms per GB, overlapped with the
// device's compute) once per block, while a one-off array is copied through staging as
// before, paying nothing.
//
// Thread-safe: several threads (one per device) may ask for ranges of one block at once;
// one registers, the others wait for it and find it locked.
#pragma once

#include <cstddef>

namespace tomo::core::cuda {

// True when [data, data + bytes) lies in a pool block that is page-locked after the call
// (also when it was before). False for memory outside the pool, a block on its first array,
// and a registration the driver refuses (the caller copies through staging).
bool PageLockReusedBlock(const void* data, size_t bytes);

}  // namespace tomo::core::cuda
