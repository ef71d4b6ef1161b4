/* mapfile.c — read-only memory maps of whole files, for every reader of
 * outside bytes (shards, safetensors, checkpoints). */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core.h"

tt_err tt_map_file(const char *path, void **base, size_t *len)
{
    *base = NULL;
    *len = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return tt_errorf("%s: cannot open: %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        close(fd);
        return tt_errorf("%s: not a regular file", path);
    }
    size_t n = (size_t)sb.st_size;
    if (n > 0) {
        void *m = mmap(NULL, n, PROT_READ, MAP_PRIVATE, fd, 0);
        if (m == MAP_FAILED) {
            int e = errno;
            close(fd);
            return tt_errorf("%s: mmap of %zu bytes failed: %s", path, n, strerror(e));
        }
        *base = m;
    }
    close(fd); /* the mapping keeps the file alive */
    *len = n;
    return 0;
}

void tt_unmap_file(void *base, size_t len)
{
    if (base && len) munmap(base, len);
}
