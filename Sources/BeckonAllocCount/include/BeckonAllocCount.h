#ifndef BECKON_ALLOC_COUNT_H
#define BECKON_ALLOC_COUNT_H

/// The number of malloc, calloc and realloc calls in this process so far (for `beckon bench`).
/// 0 on platforms where the counting allocator is not built in.
unsigned long long beckon_alloc_count(void);

/// Heap bytes in use (glibc's mallinfo2().uordblks); 0 elsewhere.
unsigned long long beckon_heap_in_use(void);

/// The process's peak resident set size in KiB (getrusage's ru_maxrss).
long beckon_peak_rss_kb(void);

#endif
