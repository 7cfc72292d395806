#ifndef BECKON_MEMORY_H
#define BECKON_MEMORY_H

/// Heap bytes in use (glibc's mallinfo2().uordblks); 0 elsewhere.
unsigned long long beckon_heap_in_use(void);

/// The process's peak resident set size in KiB (getrusage's ru_maxrss).
long beckon_peak_rss_kb(void);

/// The number of malloc, calloc and realloc calls in this process so far, where the counting allocator
/// (BeckonAllocCount) is linked into the executable: `beckon-bench`. Elsewhere 0.
unsigned long long beckon_alloc_count(void);

/// 1 where the counting allocator is linked (the counts are real), 0 elsewhere.
int beckon_alloc_counting(void);

#endif
