/* An LD_PRELOAD shim that fails chosen file syscalls of the process it is loaded into, for
 * `lanner bench faults` (workers/bench/iofault.py builds it with gcc at run time).
 *
 * Why a shim and not a FUSE file system: it needs no privilege and no daemon, it fails exactly the
 * calls Python's os module and SQLite's unix VFS make (both go through libc's PLT: write, pwrite,
 * pwrite64, writev, fsync, fdatasync), and it is switched on and off while the server runs.
 *
 * The switch is a control file named by LANNER_IOFAULT_CONTROL. While it is absent, every call goes
 * straight to libc after one stat(). While it exists, its words say what fails, for descriptors whose
 * path (from /proc/self/fd) matches one of its globs:
 *
 *   pattern=GLOB     up to 8; fnmatch(3) without flags, so `*` crosses `/`
 *   write=EIO|ENOSPC|drop   write, pwrite, pwrite64, writev, pwritev fail with that errno (after
 *                    writing nothing), or `drop`: answer success and write nothing (a lost write)
 *   fsync=EIO|ENOSPC fsync and fdatasync fail with that errno
 *   percent=N        fail only N % of the matching calls (default 100)
 *   trace            note the matching files' successful pwrites and fsyncs too (with no fault
 *                    word: a control file that injects nothing and only records)
 *
 * Each failure injected is one line in LANNER_IOFAULT_LOG (if set), `<pid> <call> <errno> <path> <a>
 * <b>`: for a failed fsync, a = the file's size; for a dropped or failed write, -1 -1. With `trace`,
 * an fsync that succeeded is `synced` with the file's size, a positional write that succeeded is
 * `pwrote` with its offset and length (appends with write() are not noted: there is one per click),
 * so the harness can count what was hit and check what came after a failed fsync.
 * The control file is re-read when its inode, size or mtime changes: write it to a temporary name
 * and rename it into place.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#define MAX_PATTERNS 8
#define DROP (-1)

struct rules {
    int write_errno; /* 0: writes pass; DROP: a lost write. */
    int fsync_errno;
    int percent;
    int patterns;
    char pattern[MAX_PATTERNS][300];
    int trace; /* Note successful pwrites and fsyncs of matching files too. */
};

static ssize_t (*real_write)(int, const void *, size_t);
static ssize_t (*real_pwrite)(int, const void *, size_t, off_t);
static ssize_t (*real_pwrite64)(int, const void *, size_t, off64_t);
static ssize_t (*real_writev)(int, const struct iovec *, int);
static ssize_t (*real_pwritev)(int, const struct iovec *, int, off_t);
static int (*real_fsync)(int);
static int (*real_fdatasync)(int);

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct rules current; /* Read under `lock`; copied out by each call. */
static struct stat seen;     /* The control file as last read. */
static int has_seen;

static void resolve(void) {
    if (real_write) return;
    real_pwrite = dlsym(RTLD_NEXT, "pwrite");
    real_pwrite64 = dlsym(RTLD_NEXT, "pwrite64");
    real_writev = dlsym(RTLD_NEXT, "writev");
    real_pwritev = dlsym(RTLD_NEXT, "pwritev");
    real_fsync = dlsym(RTLD_NEXT, "fsync");
    real_fdatasync = dlsym(RTLD_NEXT, "fdatasync");
    real_write = dlsym(RTLD_NEXT, "write");
}

static int parse_errno(const char *value) {
    if (strcmp(value, "EIO") == 0) return EIO;
    if (strcmp(value, "ENOSPC") == 0) return ENOSPC;
    if (strcmp(value, "EDQUOT") == 0) return EDQUOT;
    if (strcmp(value, "drop") == 0) return DROP;
    return 0;
}

static void parse(const char *text, struct rules *out) {
    char word[300];
    memset(out, 0, sizeof(*out));
    out->percent = 100;
    while (*text) {
        while (*text == ' ' || *text == '\n' || *text == '\t') text++;
        size_t n = strcspn(text, " \n\t");
        if (n == 0) break;
        if (n < sizeof(word)) {
            memcpy(word, text, n);
            word[n] = 0;
            if (strncmp(word, "pattern=", 8) == 0 && out->patterns < MAX_PATTERNS)
                snprintf(out->pattern[out->patterns++], sizeof(out->pattern[0]), "%s", word + 8);
            else if (strncmp(word, "write=", 6) == 0)
                out->write_errno = parse_errno(word + 6);
            else if (strncmp(word, "fsync=", 6) == 0)
                out->fsync_errno = parse_errno(word + 6);
            else if (strcmp(word, "trace") == 0)
                out->trace = 1;
            else if (strncmp(word, "percent=", 8) == 0)
                out->percent = atoi(word + 8);
        }
        text += n;
    }
}

/* The rules in force now; all zero while the control file is absent. */
static void rules_now(struct rules *out) {
    const char *control = getenv("LANNER_IOFAULT_CONTROL");
    struct stat now;
    memset(out, 0, sizeof(*out));
    if (!control || stat(control, &now) != 0) return;
    pthread_mutex_lock(&lock);
    if (!has_seen || now.st_ino != seen.st_ino || now.st_size != seen.st_size ||
        now.st_mtim.tv_sec != seen.st_mtim.tv_sec || now.st_mtim.tv_nsec != seen.st_mtim.tv_nsec) {
        char text[4096] = {0};
        int fd = open(control, O_RDONLY | O_CLOEXEC);
        if (fd >= 0) {
            ssize_t got = read(fd, text, sizeof(text) - 1);
            close(fd);
            if (got >= 0) {
                parse(text, &current);
                seen = now;
                has_seen = 1;
            }
        }
    }
    *out = current;
    pthread_mutex_unlock(&lock);
}

static int path_of(int fd, char *path, size_t size) {
    char link[64];
    snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, path, size - 1);
    if (n < 0) return 0;
    path[n] = 0;
    return 1;
}

static int matches(const struct rules *rules, int fd, char *path, size_t size) {
    if (!rules->patterns || !path_of(fd, path, size)) return 0;
    for (int i = 0; i < rules->patterns; i++)
        if (fnmatch(rules->pattern[i], path, 0) == 0) return 1;
    return 0;
}

static int chosen(const struct rules *rules) {
    if (rules->percent >= 100) return 1;
    static __thread unsigned int seed;
    if (!seed) seed = (unsigned int)getpid() ^ (unsigned int)time(NULL) ^ (unsigned int)(size_t)&seed;
    return (int)(rand_r(&seed) % 100) < rules->percent;
}

static void note(const char *call, int error, const char *path, long long a, long long b) {
    const char *log = getenv("LANNER_IOFAULT_LOG");
    char line[700];
    if (!log) return;
    int n = snprintf(line, sizeof(line), "%d %s %d %s %lld %lld\n", getpid(), call, error, path, a, b);
    int fd = open(log, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) return;
    real_write(fd, line, (size_t)n < sizeof(line) ? (size_t)n : sizeof(line) - 1);
    close(fd);
}

/* 1 with errno set if this write must fail; 2 if it must be dropped; 0 to let it through, 3 to
 * let it through and note it (`path` then holds its path). */
static int write_fault(int fd, const char *call, char *path, size_t size) {
    struct rules rules;
    resolve();
    rules_now(&rules);
    if (!(rules.write_errno || rules.trace) || !matches(&rules, fd, path, size)) return 0;
    if (!rules.write_errno || !chosen(&rules)) return rules.trace ? 3 : 0;
    note(call, rules.write_errno == DROP ? 0 : rules.write_errno, path, -1, -1);
    if (rules.write_errno == DROP) return 2;
    errno = rules.write_errno;
    return 1;
}

static size_t iov_bytes(const struct iovec *iov, int count) {
    size_t total = 0;
    for (int i = 0; i < count; i++) total += iov[i].iov_len;
    return total;
}

ssize_t write(int fd, const void *buf, size_t count) {
    char path[512];
    int fault = write_fault(fd, "write", path, sizeof(path));
    if (fault == 1) return -1;
    if (fault == 2) return (ssize_t)count;
    return real_write(fd, buf, count); /* Appends are not noted: the spool's run at every click. */
}

static ssize_t noted(const char *call, const char *path, int fault, ssize_t result, long long offset) {
    if (fault == 3 && result >= 0) note(call, 0, path, offset, (long long)result);
    return result;
}

ssize_t pwrite(int fd, const void *buf, size_t count, off_t offset) {
    char path[512];
    int fault = write_fault(fd, "pwrite", path, sizeof(path));
    if (fault == 1) return -1;
    if (fault == 2) return (ssize_t)count;
    return noted("pwrote", path, fault, real_pwrite(fd, buf, count, offset), (long long)offset);
}

ssize_t pwrite64(int fd, const void *buf, size_t count, off64_t offset) {
    char path[512];
    int fault = write_fault(fd, "pwrite64", path, sizeof(path));
    if (fault == 1) return -1;
    if (fault == 2) return (ssize_t)count;
    return noted("pwrote", path, fault, real_pwrite64(fd, buf, count, offset), (long long)offset);
}

ssize_t writev(int fd, const struct iovec *iov, int count) {
    char path[512];
    int fault = write_fault(fd, "writev", path, sizeof(path));
    if (fault == 1) return -1;
    if (fault == 2) return (ssize_t)iov_bytes(iov, count);
    return real_writev(fd, iov, count);
}

ssize_t pwritev(int fd, const struct iovec *iov, int count, off_t offset) {
    char path[512];
    int fault = write_fault(fd, "pwritev", path, sizeof(path));
    if (fault == 1) return -1;
    if (fault == 2) return (ssize_t)iov_bytes(iov, count);
    return noted("pwrote", path, fault, real_pwritev(fd, iov, count, offset), (long long)offset);
}

static int sync_call(int fd, const char *call, int (*real)(int)) {
    struct rules rules;
    char path[512];
    struct stat st;
    rules_now(&rules);
    if (!matches(&rules, fd, path, sizeof(path))) return real(fd);
    if (rules.fsync_errno > 0 && chosen(&rules)) {
        note(call, rules.fsync_errno, path, fstat(fd, &st) == 0 ? (long long)st.st_size : 0, -1);
        errno = rules.fsync_errno;
        return -1;
    }
    int result = real(fd);
    if (result == 0) note("synced", 0, path, fstat(fd, &st) == 0 ? (long long)st.st_size : 0, -1);
    return result;
}

int fsync(int fd) {
    resolve();
    return sync_call(fd, "fsync", real_fsync);
}

int fdatasync(int fd) {
    resolve();
    return sync_call(fd, "fdatasync", real_fdatasync);
}
