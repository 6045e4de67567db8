/* LD_PRELOAD shim: every POSIX shared-memory name this process opens or unlinks gets the
 * prefix in $DEPLOYBENCH_SHM_PREFIX (none when it is unset or empty).
 *
 * perf_analyzer names its system shared-memory regions after the tensors ("/id__7_0_0"),
 * the same in every process on a host, and Triton opens a region by the name perf_analyzer
 * registers: two measurements at once resize each other's regions (the server dies of
 * SIGBUS). Preloaded into the server, its python-backend stubs and the perf_analyzer runs
 * of one measurement with one prefix, the names stay consistent among them and private
 * to them. Built by deploybench.triton.install. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/types.h>

static const char *prefixed(const char *name, char *buf, size_t size) {
    const char *prefix = getenv("DEPLOYBENCH_SHM_PREFIX");
    if (prefix == NULL || *prefix == '\0') return name;
    while (*name == '/') name++;
    if (snprintf(buf, size, "/%s%s", prefix, name) >= (int)size) return NULL;
    return buf;
}

int shm_open(const char *name, int oflag, mode_t mode) {
    static int (*real)(const char *, int, mode_t) = NULL;
    char buf[256];
    const char *n = prefixed(name, buf, sizeof buf);
    if (real == NULL) real = (int (*)(const char *, int, mode_t))dlsym(RTLD_NEXT, "shm_open");
    if (n == NULL) { errno = ENAMETOOLONG; return -1; }
    return real(n, oflag, mode);
}

int shm_unlink(const char *name) {
    static int (*real)(const char *) = NULL;
    char buf[256];
    const char *n = prefixed(name, buf, sizeof buf);
    if (real == NULL) real = (int (*)(const char *))dlsym(RTLD_NEXT, "shm_unlink");
    if (n == NULL) { errno = ENAMETOOLONG; return -1; }
    return real(n);
}
