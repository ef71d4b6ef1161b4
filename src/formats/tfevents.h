/* tfevents.h — TensorBoard event files, written and read by hand: TFRecord
 * framing (length, masked CRC-32C, data, masked CRC-32C) around Event
 * protobufs that hold scalar summaries, encoded as varints without a
 * protobuf library.
 *
 * A record on disk:
 *   uint64 length (little-endian) | uint32 masked_crc32c(length's 8 bytes)
 *   | length bytes of data         | uint32 masked_crc32c(data)
 * where masked(c) = ((c >> 15) | (c << 17)) + 0xa282ead8. The data is an Event:
 *   wall_time (double, field 1), step (int64, field 2), and one of
 *   file_version (string, field 3: "brain.Event:2" in the first record),
 *   summary (field 5: repeated Value (field 1) {tag (string, field 1),
 *            simple_value (float, field 2)}),
 *   session_log (field 7: {status (enum, field 1): START = 1}). */
#ifndef TT_TFEVENTS_H
#define TT_TFEVENTS_H

#include <stddef.h>
#include <stdint.h>

#include "titan/titan.h"

#define TT_TB_FILE_VERSION "brain.Event:2"

/* CRC-32C (Castagnoli, reflected polynomial 0x82F63B78) of len bytes, and
 * TFRecord's masked form of it. */
uint32_t tt_crc32c(const void *data, size_t len);
uint32_t tt_crc32c_masked(const void *data, size_t len);
/* The 12 bytes before a record's data: its length and the length's masked CRC.
 * (The 4 bytes after the data are tt_crc32c_masked(data, len), little-endian.) */
void tt_tfrecord_header(uint64_t len, uint8_t out[12]);

/* ---- writer ---------------------------------------------------------------- */
typedef struct tt_tb_writer tt_tb_writer;

/* Create dir if needed and in it a new file named as TensorFlow names them,
 * events.out.tfevents.<unix seconds, 10 digits>.<hostname> (with .1, .2, ...
 * appended if that name exists: never overwrite or append to another file),
 * whose first record holds the file version. NULL + error naming the path. */
tt_tb_writer *tt_tb_open(const char *dir);
/* The file's path. */
const char *tt_tb_path(const tt_tb_writer *w);
/* One Event at `step` whose summary holds n scalars (tags[i], values[i]),
 * stamped with the current wall time. Every record is flushed to the OS as
 * it is written, so a killed process leaves whole records up to its last call
 * (and at worst one partial record at the end, which the reader leaves out). */
tt_err tt_tb_write_scalars(tt_tb_writer *w, int64_t step, int n, const char *const *tags, const float *values);
/* A SessionLog START event at `step`: TensorBoard (with its default
 * --purge_orphaned_data) drops the points at `step` and later that earlier
 * files of the folder hold, so a run resumed from a checkpoint replaces the
 * steps its crashed predecessor logged after that checkpoint. */
tt_err tt_tb_write_session_start(tt_tb_writer *w, int64_t step);
/* Close the file (NULL is fine); an error if the last bytes could not be written. */
tt_err tt_tb_close(tt_tb_writer *w);

/* ---- reader ---------------------------------------------------------------- */
typedef struct {
    int64_t step;
    double wall_time;
    float value;
    char *tag; /* NUL-terminated (a tag holding a NUL byte is refused) */
} tt_tb_scalar;

typedef struct {
    char file_version[64];      /* from the record carrying one; "" if none did */
    long n_records;             /* whole records read */
    int64_t session_start_step; /* step of the last SessionLog START; -1 if none */
    tt_tb_scalar *scalars;      /* every simple_value, in file order */
    size_t n_scalars;
    size_t tail_bytes;          /* bytes of an incomplete last record left out; 0 = the data ends on a record */
} tt_tb_events;

/* Decode len bytes of an event file; name stands for the file in messages.
 * Every record's length is checked against the bytes left, and both CRCs
 * against the bytes; the Event and Summary protobufs are decoded strictly
 * (every length inside the record, varints of at most 10 bytes, no group or
 * unknown wire types; unknown fields of known wire types are skipped, as
 * protobuf does). Summary values other than simple_value (images, histograms,
 * tensors) are skipped. A record cut short at the end of the data (fewer than
 * 12 header bytes left, or a header whose CRC holds but whose data and footer
 * run past the end: what a writer killed mid-record leaves) is not an error:
 * it is left out and its size reported in tail_bytes. Anything else, a CRC
 * mismatch above all, is an error naming the record, its byte offset and what
 * is wrong; *out is then empty. */
tt_err tt_tb_parse(const void *data, size_t len, const char *name, tt_tb_events *out);
/* The same for a file. */
tt_err tt_tb_read_file(const char *path, tt_tb_events *out);
void tt_tb_events_free(tt_tb_events *e);

#endif
