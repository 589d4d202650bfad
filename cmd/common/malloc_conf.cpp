// jemalloc's start-up options for every dyn tool (CMake DYN_JEMALLOC; jemalloc reads this symbol
// before the first allocation, and MALLOC_CONF in the environment can still override it).
// thp:always: jemalloc advises transparent huge pages for the memory it maps, so a run that
// fills tens of MiB (decide's reorder window and prefix index, the simulator's KV pools) takes one
// page fault per 2 MiB instead of per 4 KiB; the kernel's THP mode "madvise" (Debian's default)
// honours that advice. metadata_thp:auto does the same for jemalloc's own metadata once it grows.
extern "C" {
// NOLINTNEXTLINE: the name and type are jemalloc's interface (a weak symbol it defines too).
const char* malloc_conf = "thp:always,metadata_thp:auto";
}
