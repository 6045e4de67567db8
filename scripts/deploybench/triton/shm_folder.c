/* LD_PRELOAD shim: the POSIX shared memory of one measurement lives in a folder of its own,
 * $DEPLOYBENCH_SHM_DIR, instead of /dev/shm itself (unchanged when it is unset or empty).
 *
 * perf_analyzer names its system shared-memory regions after the tensors ("/x_0_0"), the
 * same in every process on a host, and Triton opens a region by the name perf_analyzer
 * registers: two measurements at once resized each other's regions (the server died of
 * SIGBUS), and in /dev/shm, where anyone may list, create and open names, another user
 * could plant, read or truncate them. Preloaded into the server, its python-backend stubs
 * and the perf_analyzer runs of one measurement, every name resolves to a file in that
 * measurement's folder (mode 0700: no other user can list, open or create in it), opened
 * as shm_open opens /dev/shm's, without following a link. Built by deploybench.triton.install. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/types.h>
#include <unistd.h>

/* 1: `name` resolved into buf; 0: no folder set (the real call); -1: errno set. */
static int in_folder(const char *name, char *buf, size_t size) {
    const char *dir = getenv("DEPLOYBENCH_SHM_DIR");
    if (dir == NULL || *dir == '\0') return 0;
    while (*name == '/') name++;
    if (*name == '\0' || strchr(name, '/') != NULL) { errno = EINVAL; return -1; }
    if (snprintf(buf, size, "%s/%s", dir, name) >= (int)size) { errno = ENAMETOOLONG; return -1; }
    return 1;
}

int shm_open(const char *name, int oflag, mode_t mode) {
    static int (*real)(const char *, int, mode_t) = NULL;
    char buf[PATH_MAX];
    int found = in_folder(name, buf, sizeof buf);
    if (found < 0) return -1;
    if (found) return open(buf, oflag | O_NOFOLLOW | O_CLOEXEC, mode);
    if (real == NULL) real = (int (*)(const char *, int, mode_t))dlsym(RTLD_NEXT, "shm_open");
    return real(name, oflag, mode);
}

int shm_unlink(const char *name) {
    static int (*real)(const char *) = NULL;
    char buf[PATH_MAX];
    int found = in_folder(name, buf, sizeof buf);
    if (found < 0) return -1;
    if (found) return unlink(buf);
    if (real == NULL) real = (int (*)(const char *))dlsym(RTLD_NEXT, "shm_unlink");
    return real(name);
}
