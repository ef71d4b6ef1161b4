/* test_report_render.c — the report page as a browser draws it: headless
 * Chromium renders a report of two hand-built runs to a PNG, which is decoded
 * here (zlib) to find the six plot boxes and check that each holds curve
 * pixels in the runs' colours. Skipped where no `chromium` is installed. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "report_fixture.h"
#include "formats/safetensors.h"
#include "titan/titan.h"

/* `chromium` (Debian) or `chromium-browser` on PATH, or NULL. */
static const char *find_chromium(char *buf, size_t n)
{
    static const char *names[] = {"chromium", "chromium-browser"};
    const char *path = getenv("PATH");
    for (size_t k = 0; k < 2; k++)
        for (const char *p = path; p && *p;) {
            size_t len = strcspn(p, ":");
            snprintf(buf, n, "%.*s/%s", (int)len, p, names[k]);
            if (len && access(buf, X_OK) == 0) return buf;
            p += len + (p[len] == ':');
        }
    return NULL;
}

/* ---- a PNG decoder for what Chromium writes: 8-bit RGB or RGBA, not interlaced ---- */

typedef struct {
    int w, h;
    uint8_t *rgb; /* w * h * 3 */
} image;

static uint32_t be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static int paeth(int a, int b, int c)
{
    int p = a + b - c, pa = abs(p - a), pb = abs(p - b), pc = abs(p - c);
    return pa <= pb && pa <= pc ? a : pb <= pc ? b : c;
}

static int decode_png(const uint8_t *d, size_t n, image *im)
{
    static const uint8_t sig[8] = {137, 80, 78, 71, 13, 10, 26, 10};
    if (n < 8 || memcmp(d, sig, 8)) return -1;
    int w = 0, h = 0, ch = 0;
    uint8_t *z = NULL;
    size_t zn = 0;
    for (size_t off = 8; off + 12 <= n;) {
        uint32_t len = be32(d + off);
        const uint8_t *type = d + off + 4, *body = d + off + 8;
        if (len > n - off - 12) break;
        if (!memcmp(type, "IHDR", 4) && len >= 13) {
            w = (int)be32(body), h = (int)be32(body + 4);
            ch = body[9] == 6 ? 4 : body[9] == 2 ? 3 : 0;
            if (body[8] != 8 || !ch || body[12] != 0 || w <= 0 || h <= 0 || w > 20000 || h > 20000) return -1;
        } else if (!memcmp(type, "IDAT", 4)) {
            uint8_t *nz = realloc(z, zn + len);
            if (!nz) break;
            z = nz;
            memcpy(z + zn, body, len);
            zn += len;
        }
        off += 12 + len;
    }
    if (!w || !z) {
        free(z);
        return -1;
    }
    size_t stride = (size_t)w * (size_t)ch;
    uLongf raw_n = (uLongf)((stride + 1) * (size_t)h);
    uint8_t *raw = malloc(raw_n), *px = malloc(stride * (size_t)h);
    int rc = raw && px && uncompress(raw, &raw_n, z, zn) == Z_OK && raw_n == (stride + 1) * (size_t)h ? 0 : -1;
    for (int y = 0; y < h && !rc; y++) { /* undo each row's filter */
        const uint8_t *src = raw + (size_t)y * (stride + 1) + 1;
        uint8_t *row = px + (size_t)y * stride, *up = y ? row - stride : NULL;
        int f = src[-1];
        for (size_t i = 0; i < stride; i++) {
            int a = i >= (size_t)ch ? row[i - (size_t)ch] : 0, b = up ? up[i] : 0;
            int c = up && i >= (size_t)ch ? up[i - (size_t)ch] : 0;
            int pred = f == 0 ? 0 : f == 1 ? a : f == 2 ? b : f == 3 ? (a + b) / 2 : f == 4 ? paeth(a, b, c) : -1;
            if (pred < 0) {
                rc = -1;
                break;
            }
            row[i] = (uint8_t)(src[i] + pred);
        }
    }
    if (!rc) {
        im->w = w, im->h = h;
        im->rgb = malloc((size_t)w * (size_t)h * 3);
        if (!im->rgb) rc = -1;
        for (size_t i = 0; !rc && i < (size_t)w * (size_t)h; i++) memcpy(im->rgb + 3 * i, px + (size_t)ch * i, 3);
    }
    free(z);
    free(raw);
    free(px);
    return rc;
}

static int near(const uint8_t *p, const int *c, int tol)
{
    return abs(p[0] - c[0]) <= tol && abs(p[1] - c[1]) <= tol && abs(p[2] - c[2]) <= tol;
}

/* The stroke colour of run r's first curve on the page, as RGB. */
static int run_color(const char *html, int r, int *rgb)
{
    char want[64];
    snprintf(want, sizeof want, "<polyline class=\"series\" data-run=\"%d\"", r);
    const char *t = strstr(html, want), *s = t ? strstr(t, "stroke=\"#") : NULL;
    unsigned v;
    if (!s || sscanf(s + 9, "%6x", &v) != 1) return -1;
    rgb[0] = (int)(v >> 16), rgb[1] = (int)(v >> 8 & 255), rgb[2] = (int)(v & 255);
    return 0;
}

int main(void)
{
    char chromium[4096];
    if (!find_chromium(chromium, sizeof chromium))
        return th_skip("test_report_render", "no chromium on PATH (Debian: apt-get install chromium)");
    char tmp[] = "/tmp/titan_render_XXXXXX";
    if (!mkdtemp(tmp)) return th_skip("test_report_render", "no temporary folder");
    char a[1024], b[1024], page[1024], png[1024], cmd[8192];
    snprintf(a, sizeof a, "%s/run-a", tmp);
    snprintf(b, sizeof b, "%s/run-b", tmp);
    snprintf(page, sizeof page, "%s/report.html", tmp);
    snprintf(png, sizeof png, "%s/report.png", tmp);
    const char *dirs[2] = {a, b};
    if (rf_run_a(a) | rf_run_b(b)) return th_done("test_report_render");
    int rc = tt_report(dirs, 2, page, NULL);
    CHECK_MSG(rc == 0, "report: %s", tt_last_error());
    size_t len = 0;
    char *html = rc ? NULL : tt_read_file(page, 64u << 20, &len);
    int colors[2][3];
    CHECK(html && run_color(html, 0, colors[0]) == 0 && run_color(html, 1, colors[1]) == 0);
    free(html);
    if (th_failed) return th_done("test_report_render");

    /* the command the README gives, with a profile folder of its own and no sandbox (root in CI containers) */
    snprintf(cmd, sizeof cmd,
             "timeout 120 '%s' --headless --no-sandbox --disable-gpu --hide-scrollbars --user-data-dir='%s/profile' "
             "--screenshot='%s' --window-size=1300,1500 'file://%s' > '%s/chromium.log' 2>&1",
             chromium, tmp, png, page, tmp);
    int st = system(cmd);
    uint8_t *data = (uint8_t *)tt_read_file(png, 256u << 20, &len);
    CHECK_MSG(st == 0 && data, "chromium did not render the page (status %d); see %s/chromium.log", st, tmp);
    image im = {0, 0, NULL};
    CHECK_MSG(data && decode_png(data, len, &im) == 0, "%s: not a PNG this test decodes", png);
    free(data);

    /* The plot boxes: their top edges are the only long runs of #999 on the
     * page (1 px, crisp). Below each, the box must hold curve pixels. */
    const int gray[3] = {0x99, 0x99, 0x99};
    int boxes = 0;
    for (int y = 0; y < im.h && im.rgb; y++)
        for (int x = 0; x < im.w;) {
            int x0 = x;
            while (x < im.w && near(im.rgb + 3 * ((size_t)y * (size_t)im.w + (size_t)x), gray, 6)) x++;
            if (x - x0 < 400) {
                x = x == x0 ? x + 1 : x;
                continue;
            }
            int ink[2] = {0, 0}, x1 = x;
            for (int yy = y + 2; yy < y + 200 && yy < im.h; yy++)
                for (int xx = x0 + 2; xx < x1 - 2; xx++)
                    for (int r = 0; r < 2; r++)
                        ink[r] += near(im.rgb + 3 * ((size_t)yy * (size_t)im.w + (size_t)xx), colors[r], 40);
            printf("plot box %d at (%d, %d), %d px wide: %d pixels of run A's colour, %d of run B's\n", boxes, x0, y,
                   x1 - x0, ink[0], ink[1]);
            CHECK_MSG(ink[0] >= 150, "plot box %d at (%d, %d) has %d pixels of run A's curve: blank?", boxes, x0, y,
                      ink[0]);
            if (boxes == 0) /* the loss plot (the first): run B logged only the loss */
                CHECK_MSG(ink[1] >= 100, "the loss plot has %d pixels of run B's curve", ink[1]);
            boxes++;
        }
    CHECK_MSG(boxes == 6, "%d plot boxes found in the screenshot, want 6 (loss, lr, grad norm, tokens/s, MFU, memory)",
              boxes);
    free(im.rgb);
    if (th_failed) fprintf(stderr, "the page and its screenshot are kept in %s\n", tmp);
    else {
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
        if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", tmp);
    }
    return th_done("test_report_render");
}
