"""Host-to-GPU copy bandwidth of this machine, the yardstick of ingest (issue 34: a frame to
the training matrix at 50% of it or more): pinned and pageable host memory, 1 GiB copies,
timed with CUDA events after a warm-up, medians of 5. Needs cupy. Prints one JSON line."""
import json
import statistics

import cupy as cp
import numpy as np

n = 1 << 30
dev = cp.empty(n, dtype=cp.uint8)
pinned = cp.cuda.alloc_pinned_memory(n)
host_pinned = np.frombuffer(pinned, dtype=np.uint8, count=n)
host_pinned[:] = np.arange(n, dtype=np.uint64).astype(np.uint8)
host_pageable = np.array(host_pinned)
out = {}
for name, host in [("pinned", host_pinned), ("pageable", host_pageable)]:
    times = []
    for rep in range(6):
        start, stop = cp.cuda.Event(), cp.cuda.Event()
        start.record()
        cp.cuda.runtime.memcpy(dev.data.ptr, host.ctypes.data, n, cp.cuda.runtime.memcpyHostToDevice)
        stop.record()
        stop.synchronize()
        if rep:
            times.append(cp.cuda.get_elapsed_time(start, stop) / 1e3)
    out[f"{name}_GBps"] = round(n / statistics.median(times) / 1e9, 2)
assert int(dev[12345]) == 12345 % 256
print(json.dumps(out))
