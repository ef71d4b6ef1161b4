/* config_keys.h — the run configuration's key registry (config_keys.c), for
 * config.c, which loads, sets, checks and prints the keys through it. Not a
 * public header: the rest of titan reads tt_config (titan/config.h). */
#ifndef TT_CONFIG_KEYS_H
#define TT_CONFIG_KEYS_H

#include <stddef.h>

#include "titan/config.h"

typedef enum { K_INT, K_I64, K_FLOAT, K_BOOL, K_STRING, K_ENUM } key_type;

enum {
    LO_OPEN = 1,  /* value must be > lo (else >= lo) */
    HI_OPEN = 2,  /* value must be < hi (else <= hi) */
    FLAVOR = 4,   /* model shape key: the flavor supplies it unless set explicitly */
    NEG1 = 8,     /* -1 is also allowed (a special meaning, see help) */
    OPTIONAL = 16, /* may be unset (TorchTitan's None); has_off names the flag */
    HARDWARE = 32, /* unset, the default depends on the machine (the help says how); dflt is the fallback */
    LIST = 64      /* a string key that a TOML array of strings may set: its items, comma-separated */
};

typedef struct {
    const char *key; /* "section.key" */
    key_type type;
    size_t off, size; /* the field in tt_config */
    double lo, hi;    /* numeric range */
    unsigned flags;
    const char *const *choices; /* K_ENUM: allowed names, NULL-terminated; index = C value */
    const char *dflt;           /* default as command-line text; NULL = flavor or unset */
    const char *help;
    size_t has_off; /* OPTIONAL: offset of the bool "is set" field */
} cfg_key;

/* The upper bound of counts that fit an int comfortably: a key's range up to
 * it reads as unbounded. */
#define BIG 1e9

/* The byte tokenizer: 256 byte values plus BOS and EOS. */
#define BYTE_TOKENIZER_VOCAB 258

/* Every key, grouped by section in the order the TOML output and the help
 * print them. */
extern const cfg_key tt_cfg_keys[];
extern const size_t tt_cfg_n_keys;

#endif
