#ifndef BECKON_MEMORY_H
#define BECKON_MEMORY_H

/// Heap bytes in use (glibc's mallinfo2(): the arenas' blocks in use and the blocks mapped on their own); 0 elsewhere.
unsigned long long beckon_heap_in_use(void);

/// Gives the heap's free pages back to the system (glibc's malloc_trim(0): the whole pages inside every arena's free
/// blocks, and the main arena's free top; another arena's top goes back as it frees, past the trim threshold); 1 when
/// any were given back, 0 when none were or elsewhere.
int beckon_give_back_memory(void);

/// Fixes glibc's thresholds for a long-running service: blocks of 1 MiB or more are mapped on their own (and unmapped
/// when freed), and an arena's free top beyond 128 KiB goes back to the system when a block is freed. glibc would
/// otherwise raise both after each large block freed (up to 32 and 64 MiB), keeping that much of every arena's top
/// resident after a burst. Left as they are when the environment sets glibc's malloc tunables (the operator's
/// choice); nothing elsewhere.
void beckon_configure_allocator(void);

/// The process's peak resident set size in KiB (getrusage's ru_maxrss).
long beckon_peak_rss_kb(void);

/// The number of malloc, calloc and realloc calls the calling thread has made so far, where the counting allocator
/// (BeckonAllocCount) is linked into the executable: `beckon-bench`. Elsewhere 0.
unsigned long long beckon_alloc_count(void);

/// 1 where the counting allocator is linked (the counts are real), 0 elsewhere.
int beckon_alloc_counting(void);

#endif
