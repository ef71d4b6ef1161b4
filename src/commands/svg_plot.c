/* svg_plot.c — line plots as inline SVG for `titan report`: axis ranges and
 * "nice" ticks (1-2-5 steps, or decades on a log axis), tick numbers that
 * stay short (56.4k, 2e-4), a legend that wraps, curves and reference lines. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "commands/svg_plot.h"

#define MAX_TICKS 24
#define FONT "system-ui, -apple-system, 'Segoe UI', Helvetica, Arial, sans-serif"

/* ---- text ------------------------------------------------------------------ */

void tt_html_escape(FILE *out, const char *s, long max)
{
    static const char repl[] = "\xEF\xBF\xBD"; /* U+FFFD */
    if (!s) return;
    size_t n = max < 0 ? strlen(s) : strnlen(s, (size_t)max);
    const unsigned char *u = (const unsigned char *)s;
    for (size_t i = 0; i < n;) {
        unsigned char c = u[i];
        if (c < 0x80) {
            switch (c) {
            case '&': fputs("&amp;", out); break;
            case '<': fputs("&lt;", out); break;
            case '>': fputs("&gt;", out); break;
            case '"': fputs("&quot;", out); break;
            case '\'': fputs("&#39;", out); break;
            default:
                if (c < 0x20 && c != '\n' && c != '\t') fputs(repl, out);
                else if (c == 0x7f) fputs(repl, out);
                else fputc(c, out);
            }
            i++;
            continue;
        }
        /* a multi-byte sequence: its length from the lead byte, then the
         * continuation bytes, overlongs, surrogates and > U+10FFFF refused */
        int len = c >= 0xC2 && c <= 0xDF ? 2 : c >= 0xE0 && c <= 0xEF ? 3 : c >= 0xF0 && c <= 0xF4 ? 4 : 0;
        int ok = len > 0 && i + (size_t)len <= n;
        for (int k = 1; ok && k < len; k++) ok = (u[i + (size_t)k] & 0xC0) == 0x80;
        if (ok && len == 3) {
            unsigned c1 = u[i + 1];
            ok = !(c == 0xE0 && c1 < 0xA0) && !(c == 0xED && c1 >= 0xA0);
        }
        if (ok && len == 4) {
            unsigned c1 = u[i + 1];
            ok = !(c == 0xF0 && c1 < 0x90) && !(c == 0xF4 && c1 >= 0x90);
        }
        if (ok) {
            fwrite(u + i, 1, (size_t)len, out);
            i += (size_t)len;
        } else {
            fputs(repl, out);
            i++;
        }
    }
}

/* A tick number at most about 7 characters long, precise enough to tell
 * ticks `step` apart: 1,500 -> "1.5k", 0.0002 -> "2e-4", 0.25 -> "0.25". */
static void format_tick(char *buf, size_t n, double v, double step, int e10)
{
    double a = fabs(v);
    if (e10) { /* the axis title carries the power of ten: 0.5, 1.0, 1.5 (x10^-3) */
        int d = e10 - (int)floor(log10(step) + 1e-9);
        d = d < 0 ? 0 : d > 3 ? 3 : d;
        snprintf(buf, n, "%.*f", d, a < step * 1e-6 ? 0.0 : v / pow(10.0, e10));
        return;
    }
    if (a < step * 1e-6 || a == 0) { /* zero, or rounding noise around it */
        snprintf(buf, n, "0");
        return;
    }
    if (!(step > 0) || !isfinite(step)) step = a;
    if (a >= 1e4) {
        static const char *suffix[] = {"k", "M", "G", "T", "P"};
        int e = (int)floor(log10(a) / 3);
        if (e < 1) e = 1;
        if (e > 5) e = 5;
        double u = pow(1000.0, e);
        int d = (int)ceil(-log10(step / u) - 1e-9);
        d = d < 0 ? 0 : d > 3 ? 3 : d;
        snprintf(buf, n, "%.*f%s", d, v / u, suffix[e - 1]);
    } else if (a < 1e-2) {
        int e = (int)floor(log10(a) + 1e-9);
        int d = e - (int)floor(log10(step) + 1e-9);
        d = d < 0 ? 0 : d > 3 ? 3 : d;
        double m = v / pow(10.0, e);
        if (fabs(m) >= 9.9995 && d == 0) m /= 10, e++; /* 9.9999e-4 prints as 1e-3 */
        snprintf(buf, n, "%.*fe%d", d, m, e);
    } else {
        int d = (int)ceil(-log10(step) - 1e-9);
        d = d < 0 ? 0 : d > 6 ? 6 : d;
        snprintf(buf, n, "%.*f", d, v);
    }
}

/* The power of ten linear ticks share when some are below 0.01 (lr: 1e-4 ..
 * 3e-3), so their labels read 0.5, 1.0 ... with "x10^-3" in the axis title
 * instead of mixing 0.010 and 8e-3; 0 when they need none. */
static int shared_exponent(const double *t, int n, double step)
{
    double m = 0, least = INFINITY;
    for (int i = 0; i < n; i++) {
        m = fmax(m, fabs(t[i]));
        if (fabs(t[i]) > step * 1e-6) least = fmin(least, fabs(t[i]));
    }
    if (!(step > 0) || !(m > 0) || m >= 1 || !(least < 1e-2)) return 0;
    return (int)floor(log10(m) + 1e-9);
}

/* " (×10⁻³)" in UTF-8 */
static void put_exponent(FILE *out, int e)
{
    static const char *sup[10] = {"\u2070", "\u00b9", "\u00b2", "\u00b3", "\u2074",
                                  "\u2075", "\u2076", "\u2077", "\u2078", "\u2079"};
    char digits[16];
    int n = snprintf(digits, sizeof digits, "%d", e < 0 ? -e : e);
    fputs(" (\u00d710", out);
    if (e < 0) fputs("\u207b", out);
    for (int i = 0; i < n; i++) fputs(sup[digits[i] - '0'], out);
    fputs(")", out);
}

/* ---- scales and ticks -------------------------------------------------------- */

typedef struct {
    double lo, hi;   /* the value range, mapped onto [p0, p1] pixels */
    double p0, p1;
    int log;
} scale;

static double tf(const scale *s, double v) { return s->log ? log10(v) : v; }

static double to_px(const scale *s, double v)
{
    double a = tf(s, s->lo), b = tf(s, s->hi);
    return s->p0 + (tf(s, v) - a) / (b - a) * (s->p1 - s->p0);
}

/* 1, 2 or 5 times a power of ten, near raw. */
static double nice_step(double raw)
{
    double mag = pow(10.0, floor(log10(raw)));
    double f = raw / mag;
    return (f < 1.5 ? 1 : f < 3 ? 2 : f < 7 ? 5 : 10) * mag;
}

/* Ticks inside [lo, hi]: about `target` of them on a linear axis; on a log
 * axis the powers of ten, and 2 and 5 times them when the range is short. */
static int make_ticks(const scale *s, int target, double *t, double *step)
{
    int n = 0;
    if (s->log) {
        double a = log10(s->lo), b = log10(s->hi);
        static const double m125[] = {1, 2, 5}, m1[] = {1};
        const double *mul = b - a <= 2.5 ? m125 : m1;
        int nm = b - a <= 2.5 ? 3 : 1, every = (int)ceil((b - a) / target);
        if (every < 1) every = 1;
        for (int e = (int)floor(a); e <= (int)ceil(b) && n < MAX_TICKS; e++) {
            if (nm == 1 && e % every) continue;
            for (int k = 0; k < nm && n < MAX_TICKS; k++) {
                double v = mul[k] * pow(10.0, e);
                if (v >= s->lo * (1 - 1e-9) && v <= s->hi * (1 + 1e-9)) t[n++] = v;
            }
        }
        *step = 0; /* each log tick is formatted on its own */
        if (n >= 2) return n;
        n = 0; /* less than one decade and no 1-2-5 inside: linear ticks read fine */
    }
    double range = s->hi - s->lo;
    if (!(range > 0) || !isfinite(range)) {
        t[0] = s->lo;
        *step = fabs(s->lo);
        return 1;
    }
    double st = nice_step(range / target);
    double first = ceil(s->lo / st - 1e-9) * st;
    for (double v = first; v <= s->hi + st * 1e-9 && n < MAX_TICKS; v = first + n * st) t[n++] = v;
    *step = st;
    return n;
}

/* ---- the plot ------------------------------------------------------------------ */

static int usable(const tt_svg_plot *p, double x, double y)
{
    return isfinite(x) && isfinite(y) && (!p->log_y || y > 0);
}

static int series_points(const tt_svg_plot *p, const tt_svg_series *s)
{
    int n = 0;
    for (int i = 0; i < s->n; i++) n += usable(p, s->x[i], s->y[i]);
    return n;
}

/* Character widths are guessed (no font metrics here): 0.6 em per character. */
static double text_w(const char *s, double font_px) { return 0.6 * font_px * (double)strlen(s); }

typedef struct {
    double x, w;
    int row;
} legend_slot;

void tt_svg_plot_write(FILE *out, const tt_svg_plot *p)
{
    const double W = p->width > 200 ? p->width : 200, H = p->height > 150 ? p->height : 150;
    tt_svg_plot q = *p; /* a log axis needs every point positive; else it is linear */
    int any = 0, all_pos = 1;
    double xlo = INFINITY, xhi = -INFINITY, ylo = INFINITY, yhi = -INFINITY;
    for (int k = 0; k < p->n_series; k++) {
        const tt_svg_series *s = &p->series[k];
        for (int i = 0; i < s->n; i++)
            if (isfinite(s->x[i]) && isfinite(s->y[i])) all_pos &= s->y[i] > 0;
    }
    for (int k = 0; k < p->n_hlines; k++)
        if (isfinite(p->hlines[k].y)) all_pos &= p->hlines[k].y > 0;
    q.log_y = p->log_y && all_pos;
    for (int k = 0; k < q.n_series; k++) {
        const tt_svg_series *s = &q.series[k];
        for (int i = 0; i < s->n; i++) {
            if (!usable(&q, s->x[i], s->y[i])) continue;
            any = 1;
            xlo = fmin(xlo, s->x[i]), xhi = fmax(xhi, s->x[i]);
            ylo = fmin(ylo, s->y[i]), yhi = fmax(yhi, s->y[i]);
        }
    }
    if (any) /* the reference lines only widen a plot that has data */
        for (int k = 0; k < q.n_hlines; k++)
            if (usable(&q, xlo, q.hlines[k].y)) ylo = fmin(ylo, q.hlines[k].y), yhi = fmax(yhi, q.hlines[k].y);
    if (!any) xlo = 0, xhi = 1, ylo = 0, yhi = 1;

    /* ranges: x as the data spans it, y with a margin */
    scale sx = {xlo, xhi, 0, 0, 0}, sy = {ylo, yhi, 0, 0, q.log_y};
    if (!(xhi > xlo)) sx.lo = xlo - 1, sx.hi = xhi + 1;
    if (q.log_y) {
        double a = log10(ylo), b = log10(yhi), pad = fmax(0.04 * (b - a), 0.02);
        sy.lo = pow(10, a - pad), sy.hi = pow(10, b + pad);
    } else {
        double base = q.y_zero && ylo > 0 ? 0 : ylo;
        double pad = yhi > base ? 0.05 * (yhi - base) : fmax(fabs(base) * 0.1, 1e-3);
        sy.lo = base - pad, sy.hi = yhi + pad;
        if (base >= 0 && sy.lo < 0) sy.lo = 0; /* no negative axis under data that cannot be negative */
        if (!isfinite(sy.hi - sy.lo)) sy.lo = ylo, sy.hi = yhi; /* values near DBL_MAX: no margin */
    }

    /* the legend: entries of the curves that have points, wrapped into rows */
    legend_slot slot[64];
    int n_leg = 0, rows = 0;
    const double lfont = 11, mr = 20;
    double lx = 0;
    for (int k = 0; k < q.n_series && n_leg < 64; k++) {
        if (!series_points(&q, &q.series[k])) continue;
        double w = 26 + text_w(q.series[k].label ? q.series[k].label : "", lfont) + 14;
        if (n_leg == 0 || lx + w > W - mr - 8) lx = 0, rows++;
        slot[n_leg++] = (legend_slot){lx, w, rows - 1};
        lx += w;
    }

    /* the y tick labels decide the left margin */
    double yt[MAX_TICKS], xt[MAX_TICKS], ystep, xstep;
    char lab[32];
    int plot_h_guess = (int)(H - 60 - 16 * rows);
    int nyt = make_ticks(&sy, plot_h_guess > 200 ? 6 : 4, yt, &ystep), nxt;
    double maxw = 0;
    const int ye = shared_exponent(yt, nyt, ystep);
    for (int i = 0; i < nyt; i++) {
        format_tick(lab, sizeof lab, yt[i], ystep ? ystep : yt[i], ye);
        maxw = fmax(maxw, text_w(lab, 11));
    }
    const double ml = 30 + maxw, mt = 30 + 16 * rows, mb = 44;
    sx.p0 = ml, sx.p1 = W - mr;
    sy.p0 = H - mb, sy.p1 = mt; /* y grows upwards */
    nxt = make_ticks(&sx, (int)((sx.p1 - sx.p0) / 80), xt, &xstep);
    if (xstep > 0 && xstep < 1 && xlo == floor(xlo) && xhi == floor(xhi) && xhi - xlo >= 1) {
        /* steps are whole numbers: no tick at step 2.5 */
        nxt = 0;
        for (double v = ceil(sx.lo); v <= sx.hi && nxt < MAX_TICKS; v++) xt[nxt++] = v;
        xstep = 1;
    }
    const double bx = sx.p0, by = sy.p1, bw = sx.p1 - sx.p0, bh = sy.p0 - sy.p1;

    fprintf(out, "<svg class=\"plot\" data-plot=\"");
    tt_html_escape(out, q.id, 64);
    fprintf(out, "\" xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\" "
                 "font-family=\"%s\" role=\"img\">\n", W, H, W, H, FONT);
    fprintf(out, "<title>");
    tt_html_escape(out, q.title, 200);
    fprintf(out, "</title>\n<text class=\"plot-title\" x=\"%.1f\" y=\"19\" font-size=\"14\" font-weight=\"600\" "
                 "fill=\"#222\">", ml);
    tt_html_escape(out, q.title, 200);
    fprintf(out, "</text>\n");
    /* the box's background, the grid, then the frame over the grid's ends */
    fprintf(out, "<rect class=\"plot-box\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" data-x0=\"%.17g\" "
                 "data-x1=\"%.17g\" data-y0=\"%.17g\" data-y1=\"%.17g\" data-log-y=\"%d\" fill=\"#fff\"/>\n",
            bx, by, bw, bh, sx.lo, sx.hi, sy.lo, sy.hi, q.log_y);
    fprintf(out, "<g class=\"grid\" stroke=\"#eee\" shape-rendering=\"crispEdges\">\n");
    for (int i = 0; i < nxt; i++)
        fprintf(out, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>", to_px(&sx, xt[i]), by,
                to_px(&sx, xt[i]), by + bh);
    for (int i = 0; i < nyt; i++)
        fprintf(out, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>", bx, to_px(&sy, yt[i]), bx + bw,
                to_px(&sy, yt[i]));
    fprintf(out, "\n</g>\n<rect class=\"plot-frame\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" "
                 "fill=\"none\" stroke=\"#999\" shape-rendering=\"crispEdges\"/>\n", bx, by, bw, bh);

    /* the axes: ticks, numbers, titles */
    fprintf(out, "<g class=\"axis x-axis\" font-size=\"11\" fill=\"#444\" shape-rendering=\"crispEdges\">\n");
    for (int i = 0; i < nxt; i++) {
        double x = to_px(&sx, xt[i]);
        format_tick(lab, sizeof lab, xt[i], xstep, 0);
        fprintf(out, "<line class=\"tick\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#666\"/>"
                     "<text class=\"tick-label\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%s</text>\n",
                x, by + bh, x, by + bh + 5, x, by + bh + 17, lab);
    }
    fprintf(out, "<line class=\"axis-line\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#666\"/>\n", bx,
            by + bh, bx + bw, by + bh);
    fprintf(out, "<text class=\"axis-title x-title\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" font-size=\"12\" "
                 "fill=\"#222\">", bx + bw / 2, H - 8);
    tt_html_escape(out, q.x_title, 200);
    fprintf(out, "</text>\n</g>\n"
                 "<g class=\"axis y-axis\" font-size=\"11\" fill=\"#444\" shape-rendering=\"crispEdges\">\n");
    for (int i = 0; i < nyt; i++) {
        double y = to_px(&sy, yt[i]);
        format_tick(lab, sizeof lab, yt[i], ystep ? ystep : yt[i], ye);
        fprintf(out, "<line class=\"tick\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#666\"/>"
                     "<text class=\"tick-label\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%s</text>\n",
                bx - 5, y, bx, y, bx - 8, y + 4, lab);
    }
    fprintf(out, "<line class=\"axis-line\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#666\"/>\n",
            bx, by, bx, by + bh);
    fprintf(out, "<text class=\"axis-title y-title\" transform=\"translate(14 %.1f) rotate(-90)\" "
                 "text-anchor=\"middle\" font-size=\"12\" fill=\"#222\">", by + bh / 2);
    tt_html_escape(out, q.y_title, 200);
    if (ye) put_exponent(out, ye);
    if (q.log_y) fputs(", log scale", out);
    fprintf(out, "</text>\n</g>\n");

    if (!any)
        fprintf(out, "<text class=\"no-data\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" font-size=\"13\" "
                     "fill=\"#888\">nothing logged</text>\n", bx + bw / 2, by + bh / 2);

    /* reference lines, under the curves, the first run's on top; one label per distinct value */
    for (int k = q.n_hlines - 1; any && k >= 0; k--) {
        const tt_svg_hline *h = &q.hlines[k];
        if (!usable(&q, xlo, h->y)) continue;
        double y = to_px(&sy, h->y);
        fprintf(out, "<line class=\"hline\" data-run=\"%d\" data-y=\"%.17g\" x1=\"%.1f\" y1=\"%.2f\" x2=\"%.1f\" "
                     "y2=\"%.2f\" stroke=\"%s\" stroke-width=\"1.2\" stroke-dasharray=\"2 3\"/>\n",
                h->run, h->y, bx, y, bx + bw, y, h->color);
        int dup = 0;
        for (int j = 0; j < k; j++) dup |= fabs(q.hlines[j].y - h->y) <= 1e-9 * fabs(h->y);
        if (!dup && h->label) {
            fprintf(out, "<text class=\"hline-label\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\" font-size=\"11\" "
                         "fill=\"%s\">", bx + bw - 4, y - 4, h->color);
            tt_html_escape(out, h->label, 200);
            fprintf(out, "</text>\n");
        }
    }

    /* the curves: one polyline vertex per usable point */
    for (int k = 0; k < q.n_series; k++) {
        const tt_svg_series *s = &q.series[k];
        int np = series_points(&q, s);
        if (!np) continue;
        fprintf(out, "<g class=\"curve\" data-run=\"%d\" data-series=\"", s->run);
        tt_html_escape(out, s->key, 64);
        fprintf(out, "\">\n<polyline class=\"series\" data-run=\"%d\" data-series=\"", s->run);
        tt_html_escape(out, s->key, 64);
        fprintf(out, "\" fill=\"none\" stroke=\"%s\" stroke-width=\"1.8\" stroke-linejoin=\"round\"%s points=\"",
                s->color, s->dashed ? " stroke-dasharray=\"6 4\"" : "");
        int first = 1;
        for (int i = 0; i < s->n; i++) {
            if (!usable(&q, s->x[i], s->y[i])) continue;
            fprintf(out, "%s%.2f,%.2f", first ? "" : " ", to_px(&sx, s->x[i]), to_px(&sy, s->y[i]));
            first = 0;
        }
        fprintf(out, "\"/>\n");
        if (s->markers || np == 1) /* a lone point draws no line: it gets a dot */
            for (int i = 0; i < s->n; i++) {
                if (!usable(&q, s->x[i], s->y[i])) continue;
                /* dashed curves get hollow dots, to tell them from a solid one on the same points */
                fprintf(out, "<circle class=\"marker\" cx=\"%.2f\" cy=\"%.2f\" r=\"%s\" fill=\"%s\" stroke=\"%s\" "
                             "stroke-width=\"1.5\"><title>",
                        to_px(&sx, s->x[i]), to_px(&sy, s->y[i]), s->dashed ? "3" : "2.2",
                        s->dashed ? "#fff" : s->color, s->color);
                tt_html_escape(out, s->label, 200);
                fprintf(out, ": step %.17g, %.6g</title></circle>\n", s->x[i], s->y[i]);
            }
        fprintf(out, "</g>\n");
    }

    /* the legend, above the plot box */
    fprintf(out, "<g class=\"legend\" font-size=\"%.0f\" fill=\"#222\">\n", lfont);
    for (int k = 0, e = 0; k < q.n_series && e < n_leg; k++) {
        const tt_svg_series *s = &q.series[k];
        if (!series_points(&q, s)) continue;
        const legend_slot *l = &slot[e++];
        double x = ml + l->x, y = 38 + 16 * l->row;
        fprintf(out, "<g class=\"legend-entry\" data-run=\"%d\" data-series=\"", s->run);
        tt_html_escape(out, s->key, 64);
        fprintf(out, "\"><line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" stroke-width=\"2.5\"%s/>"
                     "<text x=\"%.1f\" y=\"%.1f\">",
                x, y - 4, x + 20, y - 4, s->color, s->dashed ? " stroke-dasharray=\"5 3\"" : "", x + 25, y);
        tt_html_escape(out, s->label, 200);
        fprintf(out, "</text></g>\n");
    }
    fprintf(out, "</g>\n</svg>\n");
}
