// jemalloc's start-up options for every dyn tool (CMake DYN_JEMALLOC; jemalloc reads this symbol
// before the first allocation, and MALLOC_CONF in the environment can still override it).
// thp:always: jemalloc advises transparent huge pages for the memory it maps, so a run that
// fills tens of MiB (decide's reorder window and prefix index) takes one page fault per 2 MiB
// instead of per 4 KiB; the kernel's THP mode "madvise" (Debian's default) honours that advice.
// metadata_thp:auto does the same for jemalloc's own metadata once it grows.
// DYN_MALLOC_NO_THP (dyn-replay): jemalloc's defaults, no THP advice for the heap nor its
// metadata. The simulator fills gigabytes of per-worker KV pools and index records a little at a
// time, and a fresh 2 MiB page cost far more than its 512 small faults on this VM: dyn-replay
// --sim on 20,000 rows at 1,000 workers took 1.06-1.21 s user + 1.56-1.71 s sys with both,
// 1.10-1.36 s + 0.17-0.30 s with neither (metadata THP alone: + 0.19-0.77 s sys); 8 workers,
// 12,031 rows: 0.32-0.41 + 0.18-0.21 s against 0.31-0.39 + 0.01 s (issue 54).
extern "C" {
// The name and type are jemalloc's interface (a weak symbol it defines too).
#ifdef DYN_MALLOC_NO_THP
// NOLINTNEXTLINE
const char* malloc_conf = "thp:default,metadata_thp:disabled";
#else
// NOLINTNEXTLINE
const char* malloc_conf = "thp:always,metadata_thp:auto";
#endif
}
