/* asan_keep_modules.c — linked into the sanitizer build's programs only
 * (CMakeLists.txt, TITAN_SANITIZE): dlclose does nothing, so every shared
 * object a program loads stays mapped until it exits.
 *
 * Why: LeakSanitizer looks for leaks at exit, after MPI_Finalize has unloaded
 * Open MPI's plugins (openmpi3/mca_*.so). The allocations those plugins keep
 * by design then have return addresses in no module, so the suppressions
 * (tests/lsan_openmpi.supp) cannot match them there, and each failed lookup
 * makes the sanitizer read /proc/self/maps again: about half of a short MPI
 * job's time went to it. Mapped, they match the plugins' rule at once.
 * A program's own definition comes first in the dynamic symbol lookup, so
 * this one replaces the C library's for Open MPI's calls too. */
int dlclose(void *handle);

int dlclose(void *handle)
{
    (void)handle;
    return 0;
}
