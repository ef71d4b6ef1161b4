/* svg_plot.h — line plots as inline SVG, drawn by our own code for `titan
 * report`: a plot box with axes, ticks and numbers, titled axes, a legend,
 * one polyline vertex per data point, and horizontal reference lines. */
#ifndef TT_SVG_PLOT_H
#define TT_SVG_PLOT_H
#include <stdio.h>

/* One curve. A point whose x or y is not finite (or, on a log axis, whose y
 * is not positive) is left out; the rest are joined in the order given. */
typedef struct {
    const char *label;   /* legend text */
    const char *color;   /* a CSS colour the caller chose ("#1f77b4"), written as is */
    const double *x, *y; /* n points */
    int n;
    int dashed;          /* dashed line (validation, arena memory) */
    int markers;         /* a dot, with a tooltip, on each point */
    int run;             /* which run (data-run), for the legend and tests */
    const char *key;     /* what it is (data-series): "loss", "val_loss", ... */
} tt_svg_series;

/* A horizontal line across the plot box with a label at its right end
 * (the corpus floor). */
typedef struct {
    double y;
    const char *label, *color;
    int run;
} tt_svg_hline;

typedef struct {
    const char *id;                      /* data-plot: "loss", "lr", ... */
    const char *title, *x_title, *y_title;
    int width, height;                   /* of the whole SVG, in pixels */
    int log_y;                           /* logarithmic y axis, where every y is positive */
    int y_zero;                          /* a linear y axis over positive data starts at 0 */
    const tt_svg_series *series;
    int n_series;
    const tt_svg_hline *hlines;
    int n_hlines;
} tt_svg_plot;

/* Write the plot as one <svg class="plot"> element. What a reader (or a test)
 * needs to map pixels back to values is on the plot box:
 *   <rect class="plot-box" x y width height data-x0 data-x1 data-y0 data-y1 data-log-y>
 * (the axis ranges), and each curve is <polyline class="series" data-run
 * data-series points="x,y ...">. Text is escaped. */
void tt_svg_plot_write(FILE *out, const tt_svg_plot *p);

/* Write s with &, <, >, " and ' as entities, invalid UTF-8 and control
 * characters (but tab and newline) as U+FFFD: safe in HTML and SVG text and
 * in quoted attributes. At most max bytes of s are read (max < 0: all). */
void tt_html_escape(FILE *out, const char *s, long max);

#endif
