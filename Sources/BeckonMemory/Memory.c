// Memory readings for `beckon bench` and the service: peak RSS and heap in use for every build, the service's
// allocator thresholds and giving free pages back (once it settles), and allocation counts where the counting
// allocator (Sources/BeckonAllocCount) is linked into the executable. Only `beckon-bench` links it: its malloc
// replaces glibc's in the whole process, which a service must not pay for. Here the count is a weak 0 that the
// counting allocator's definitions override at link time.
#include "BeckonMemory.h"
#include <stddef.h>
#include <sys/resource.h>

long beckon_peak_rss_kb(void) {
    struct rusage u;
    return getrusage(RUSAGE_SELF, &u) == 0 ? u.ru_maxrss : 0;
}

#if defined(__linux__) && defined(__GLIBC__)
#include <malloc.h>
#include <stdlib.h>
unsigned long long beckon_heap_in_use(void) {
    struct mallinfo2 m = mallinfo2();
    return m.uordblks + m.hblkhd;
}
int beckon_give_back_memory(void) { return malloc_trim(0); }
void beckon_configure_allocator(void) {
    if (getenv("MALLOC_MMAP_THRESHOLD_") || getenv("MALLOC_TRIM_THRESHOLD_") || getenv("GLIBC_TUNABLES")) return;
    mallopt(M_MMAP_THRESHOLD, 1 << 20);
    mallopt(M_TRIM_THRESHOLD, 128 << 10);
}
#else
unsigned long long beckon_heap_in_use(void) { return 0; }
int beckon_give_back_memory(void) { return 0; }
void beckon_configure_allocator(void) {}
#endif

__attribute__((weak)) unsigned long long beckon_alloc_count(void) { return 0; }
__attribute__((weak)) int beckon_alloc_counting(void) { return 0; }
