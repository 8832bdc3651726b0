/*
 * _fastscan: single-pass native reader for dftracer trace files.
 *
 * Why: the DuckDB path spends most of its time extracting ~25 JSON fields into Arrow
 * and re-aggregating them per batch; this module decompresses (ISA-L or zlib, single- and
 * multi-member gzip), parses each line with a scanner specialised for dftracer's JSON
 * lines and folds every event straight into the small per-file tables the DuckDB path
 * builds (see batch.py), plus the order-dependent passes (position tracking, interval
 * unions) that vectorized.py implements.  Python then runs the same finishing SQL.
 *
 * Exactness rule: the scanner accepts only what it understands completely.  Anything
 * else (a float or boolean where DuckDB would convert, an escape it cannot decode, a
 * duplicate key, a corrupt line, a truncated gzip stream, an integer overflow) raises
 * Fallback, and the caller reads the whole file with the DuckDB path instead.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef DFT_HAVE_ISAL
#include <isa-l/igzip_lib.h>
#else
#include <zlib.h>
#endif

static PyObject *FallbackError;

#define LIKELY(x) __builtin_expect(!!(x), 1)
#ifndef NOINL
#define NOINL
#endif

/* ------------------------------------------------------------------------------ */
/* small growable helpers                                                          */

#define UNKNOWN (-1)
#define NFAM 4
#define FAM_READ 0
#define FAM_WRITE 1
#define FAM_META 2
#define FAM_SYNC 3
#define ROLE_OTHER 0
#define ROLE_STREAM 1
#define ROLE_POSITIONAL 2
#define ROLE_SETTER 3
#define SET_OPEN 1
#define SET_LSEEK 2
#define SET_FSEEK 3
#define SET_REWIND 4
#define MAX_BINS 16
#define MAX_LINE (64u << 20)
#define MAX_DEPTH 64

typedef struct {
    char *why; /* static string: why the file must take the DuckDB path */
} Fail;

static void *xrealloc(void *p, size_t n) {
    void *q = realloc(p, n ? n : 1);
    return q;
}

#define GROW(ptr, n, cap, need, fail_label)                                   \
    do {                                                                      \
        if ((need) > (cap)) {                                                 \
            size_t nc_ = (cap) ? (cap) * 2 : 64;                              \
            while (nc_ < (need)) nc_ *= 2;                                    \
            void *np_ = xrealloc((ptr), nc_ * sizeof(*(ptr)));                \
            if (!np_) goto fail_label;                                        \
            (ptr) = np_;                                                      \
            (cap) = nc_;                                                      \
        }                                                                     \
        (void)(n);                                                            \
    } while (0)

/* ------------------------------------------------------------------------------ */
/* hashing and maps                                                                */

static inline uint64_t mix64(uint64_t x) {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ULL;
    x ^= x >> 33;
    return x;
}

static uint64_t hash_bytes(const char *s, size_t n) {
    uint64_t h = 0x9e3779b97f4a7c15ULL ^ (uint64_t)n;
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, s, 8);
        h = (h ^ mix64(w)) * 0x100000001b3ULL;
        s += 8;
        n -= 8;
    }
    uint64_t w = 0;
    memcpy(&w, s, n);
    h = (h ^ mix64(w ^ ((uint64_t)n << 56))) * 0x100000001b3ULL;
    return mix64(h);
}

/* Map from a pair of 64-bit keys to a dense slot number (1-based; 0 = empty). */
typedef struct {
    uint64_t *a, *b;
    uint32_t *v;
    size_t mask, n;
} Map;

static int map_init(Map *m, size_t cap) {
    m->mask = cap - 1;
    m->n = 0;
    m->a = calloc(cap, sizeof(uint64_t));
    m->b = calloc(cap, sizeof(uint64_t));
    m->v = calloc(cap, sizeof(uint32_t));
    return m->a && m->b && m->v;
}

static void map_free(Map *m) {
    free(m->a);
    free(m->b);
    free(m->v);
    memset(m, 0, sizeof(*m));
}

static int map_grow(Map *m) {
    Map g;
    if (!map_init(&g, (m->mask + 1) * 2)) {
        map_free(&g);
        return 0;
    }
    for (size_t i = 0; i <= m->mask; i++) {
        if (!m->v[i]) continue;
        size_t j = mix64(m->a[i] * 0x9e3779b97f4a7c15ULL ^ m->b[i]) & g.mask;
        while (g.v[j]) j = (j + 1) & g.mask;
        g.a[j] = m->a[i];
        g.b[j] = m->b[i];
        g.v[j] = m->v[i];
    }
    g.n = m->n;
    map_free(m);
    *m = g;
    return 1;
}

/* The slot of (a, b); a new key gets slot n+1 and *added = 1.  Returns 0 on OOM. */
static uint32_t map_get(Map *m, uint64_t a, uint64_t b, int *added) {
    if ((m->n + 1) * 2 > m->mask + 1 && !map_grow(m)) return 0;
    size_t j = mix64(a * 0x9e3779b97f4a7c15ULL ^ b) & m->mask;
    while (m->v[j]) {
        if (m->a[j] == a && m->b[j] == b) {
            *added = 0;
            return m->v[j];
        }
        j = (j + 1) & m->mask;
    }
    m->a[j] = a;
    m->b[j] = b;
    m->v[j] = (uint32_t)++m->n;
    *added = 1;
    return m->v[j];
}

/* The slot of (a, b), or 0 when it is not in the map (a lookup that never inserts). */
static uint32_t map_find(const Map *m, uint64_t a, uint64_t b) {
    size_t j = mix64(a * 0x9e3779b97f4a7c15ULL ^ b) & m->mask;
    while (m->v[j]) {
        if (m->a[j] == a && m->b[j] == b) return m->v[j];
        j = (j + 1) & m->mask;
    }
    return 0;
}

/* One remembered lookup in front of a Map: consecutive events mostly repeat their keys. */
typedef struct {
    uint64_t a, b;
    uint32_t v;
} MapCache;

static inline uint32_t map_get_c(Map *m, MapCache *c, uint64_t a, uint64_t b, int *added) {
    if (c->v && c->a == a && c->b == b) {
        *added = 0;
        return c->v;
    }
    uint32_t v = map_get(m, a, b, added);
    c->a = a;
    c->b = b;
    c->v = v;
    return v;
}

/* String interner: id 0 is NULL; ids are dense. */
typedef struct {
    char *arena;
    size_t alen, acap;
    size_t *off;
    uint32_t *len;
    uint64_t *hash;
    size_t n, cap; /* ids in use (including 0) */
    uint32_t *tab;
    size_t tmask;
} Interner;

static int interner_init(Interner *t) {
    memset(t, 0, sizeof(*t));
    t->cap = 1024;
    t->off = malloc(t->cap * sizeof(size_t));
    t->len = malloc(t->cap * sizeof(uint32_t));
    t->hash = malloc(t->cap * sizeof(uint64_t));
    t->tmask = 4095;
    t->tab = calloc(t->tmask + 1, sizeof(uint32_t));
    t->acap = 1 << 16;
    t->arena = malloc(t->acap);
    if (!t->off || !t->len || !t->hash || !t->tab || !t->arena) return 0;
    t->off[0] = 0;
    t->len[0] = 0;
    t->hash[0] = 0;
    t->n = 1;
    return 1;
}

static void interner_free(Interner *t) {
    free(t->arena);
    free(t->off);
    free(t->len);
    free(t->hash);
    free(t->tab);
    memset(t, 0, sizeof(*t));
}

static inline const char *istr(const Interner *t, uint32_t id) { return t->arena + t->off[id]; }

/* id of the bytes s[0:n], adding them if new; 0 on OOM (never a valid string id). */
static uint32_t intern(Interner *t, const char *s, size_t n) {
    uint64_t h = hash_bytes(s, n);
    size_t j = h & t->tmask;
    while (t->tab[j]) {
        uint32_t id = t->tab[j];
        if (t->hash[id] == h && t->len[id] == n && memcmp(t->arena + t->off[id], s, n) == 0) return id;
        j = (j + 1) & t->tmask;
    }
    if (n > 0xffffffffu) return 0;
    if (t->n + 1 > t->cap) {
        size_t nc = t->cap * 2;
        size_t *o = realloc(t->off, nc * sizeof(size_t));
        if (!o) return 0;
        t->off = o;
        uint32_t *l = realloc(t->len, nc * sizeof(uint32_t));
        if (!l) return 0;
        t->len = l;
        uint64_t *hh = realloc(t->hash, nc * sizeof(uint64_t));
        if (!hh) return 0;
        t->hash = hh;
        t->cap = nc;
    }
    if (t->alen + n + 1 > t->acap) {
        size_t nc = t->acap * 2;
        while (nc < t->alen + n + 1) nc *= 2;
        char *a = realloc(t->arena, nc);
        if (!a) return 0;
        t->arena = a;
        t->acap = nc;
    }
    memcpy(t->arena + t->alen, s, n);
    t->arena[t->alen + n] = 0;
    uint32_t id = (uint32_t)t->n++;
    t->off[id] = t->alen;
    t->len[id] = (uint32_t)n;
    t->hash[id] = h;
    t->alen += n + 1;
    t->tab[j] = id;
    if (t->n * 2 > t->tmask + 1) { /* rehash */
        size_t nm = (t->tmask + 1) * 2 - 1;
        uint32_t *nt = calloc(nm + 1, sizeof(uint32_t));
        if (!nt) return 0;
        for (size_t i = 1; i < t->n; i++) {
            size_t k = t->hash[i] & nm;
            while (nt[k]) k = (k + 1) & nm;
            nt[k] = (uint32_t)i;
        }
        free(t->tab);
        t->tab = nt;
        t->tmask = nm;
    }
    return id;
}

/* ------------------------------------------------------------------------------ */
/* configuration (semantics.py data, passed in by Python)                          */

typedef struct {
    char name[32];
    uint8_t fam, role, item, setter;
} Call;

typedef struct {
    Call *calls;
    size_t ncalls;
    char io_cats[8][16]; /* upper case */
    int nio;
    char compute_cats[8][32]; /* lower case */
    int ncompute;
    char compute_sub[32]; /* lower-case substring of a compute event name */
    int64_t bins[MAX_BINS];
    int nbins;
    int64_t small;
    int64_t o_append, seek_set, align;
    int64_t max_ts, max_value; /* number limits (limits.py): larger values take the DuckDB path */
    size_t max_line;           /* longest line held in memory (limits.py) */
} Config;

/* ------------------------------------------------------------------------------ */
/* parsed line                                                                     */

typedef struct {
    const char *p;
    uint32_t n;
    uint8_t set; /* 0 NULL, 1 present */
    uint8_t esc; /* contains backslash escapes (raw view needs decoding) */
} Str;

typedef struct {
    int64_t v;
    uint8_t set;
} I64;

enum { A_RET, A_OFFSET, A_SIZE, A_WHENCE, A_FLAGS, A_RANK, A_DFTCNT, A_DUR, A_DURSUM, A_RETSUM, A_SIZEMIN,
       A_SIZEMAX, N_AINT };
enum { T_FHASH, T_HHASH, T_FNAME, T_HOSTNAME, T_NAME, T_VALUE, T_MODE, T_EPOCH, T_STEP, T_CMDHASH, T_VERSION,
       T_CFG, N_ATXT };

typedef struct {
    Str name, cat, ph;
    I64 pid, ts, dur;
    uint8_t has_args;
    I64 ai[N_AINT];
    Str at[N_ATXT];
} Ev;

/* ------------------------------------------------------------------------------ */
/* JSON scanning                                                                   */

static const char *const FAIL_JSON = "a line is not JSON the native scanner handles";

static inline const char *skip_ws(const char *p, const char *e) {
    if (LIKELY(p < e && (unsigned char)*p > ' ')) return p;
    while (p < e && (*p == ' ' || *p == '\t')) p++;
    return p;
}

static int valid_utf8(const unsigned char *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        unsigned c = s[i];
        if (c < 0x80) {
            i++;
            continue;
        }
        size_t k;
        uint32_t cp;
        if ((c & 0xe0) == 0xc0) {
            k = 1;
            cp = c & 0x1f;
        } else if ((c & 0xf0) == 0xe0) {
            k = 2;
            cp = c & 0x0f;
        } else if ((c & 0xf8) == 0xf0) {
            k = 3;
            cp = c & 0x07;
        } else {
            return 0;
        }
        if (i + k >= n) return 0;
        for (size_t j = 1; j <= k; j++) {
            if ((s[i + j] & 0xc0) != 0x80) return 0;
            cp = (cp << 6) | (s[i + j] & 0x3f);
        }
        if ((k == 1 && cp < 0x80) || (k == 2 && cp < 0x800) || (k == 3 && cp < 0x10000) || cp > 0x10ffff ||
            (cp >= 0xd800 && cp <= 0xdfff))
            return 0;
        i += k + 1;
    }
    return 1;
}

static inline int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

static int hex4(const char *p, uint32_t *out) {
    uint32_t v = 0;
    for (int i = 0; i < 4; i++) {
        int h = hexval(p[i]);
        if (h < 0) return 0;
        v = (v << 4) | (uint32_t)h;
    }
    *out = v;
    return 1;
}

static inline uint64_t has_zero_byte(uint64_t v) { return (v - 0x0101010101010101ULL) & ~v; }

/* *pp points just after the opening quote.  On success *pp is after the closing quote. */
static int scan_string(const char **pp, const char *e, Str *out) {
    const char *p = *pp, *s = p;
    int esc = 0, hi = 0;
    for (;;) {
        /* eight bytes at a time until a quote, backslash, control or non-ASCII byte */
        while (p + 8 <= e) {
            uint64_t w;
            memcpy(&w, p, 8);
            uint64_t m = has_zero_byte(w ^ 0x2222222222222222ULL) | has_zero_byte(w ^ 0x5c5c5c5c5c5c5c5cULL) |
                         ((w - 0x2020202020202020ULL) & ~w) | w;
            m &= 0x8080808080808080ULL;
            if (m) {
                p += __builtin_ctzll(m) >> 3;
                break;
            }
            p += 8;
        }
        while (p < e) {
            unsigned char c = (unsigned char)*p;
            if (c == '"' || c == '\\' || c < 0x20) break;
            hi |= c >> 7;
            p++;
        }
        if (p >= e) return 0;
        unsigned char c = (unsigned char)*p;
        if (c == '"') break;
        if (c < 0x20) return 0;
        /* backslash */
        esc = 1;
        if (p + 1 >= e) return 0;
        char x = p[1];
        if (x == '"' || x == '\\' || x == '/' || x == 'b' || x == 'f' || x == 'n' || x == 'r' || x == 't') {
            p += 2;
        } else if (x == 'u') {
            uint32_t cp;
            if (p + 6 > e || !hex4(p + 2, &cp)) return 0;
            p += 6;
            if (cp >= 0xdc00 && cp <= 0xdfff) return 0; /* lone low surrogate */
            if (cp >= 0xd800 && cp <= 0xdbff) {
                uint32_t lo;
                if (p + 6 > e || p[0] != '\\' || p[1] != 'u' || !hex4(p + 2, &lo) || lo < 0xdc00 || lo > 0xdfff)
                    return 0;
                p += 6;
            }
            if (cp == 0) return 0; /* NUL inside a string: let DuckDB decide */
        } else {
            return 0;
        }
    }
    if (hi && !valid_utf8((const unsigned char *)s, (size_t)(p - s))) return 0;
    out->p = s;
    out->n = (uint32_t)(p - s);
    out->set = 1;
    out->esc = (uint8_t)esc;
    *pp = p + 1;
    return 1;
}

/* Decode the escapes of a raw string view into buf (which must hold s->n bytes). */
static size_t unescape(const Str *s, char *buf) {
    const char *p = s->p, *e = s->p + s->n;
    char *o = buf;
    while (p < e) {
        if (*p != '\\') {
            *o++ = *p++;
            continue;
        }
        char x = p[1];
        p += 2;
        switch (x) {
        case 'b': *o++ = '\b'; break;
        case 'f': *o++ = '\f'; break;
        case 'n': *o++ = '\n'; break;
        case 'r': *o++ = '\r'; break;
        case 't': *o++ = '\t'; break;
        case 'u': {
            uint32_t cp = 0;
            hex4(p, &cp);
            p += 4;
            if (cp >= 0xd800 && cp <= 0xdbff) {
                uint32_t lo = 0xdc00;
                hex4(p + 2, &lo);
                p += 6;
                cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
            }
            if (cp < 0x80) {
                *o++ = (char)cp;
            } else if (cp < 0x800) {
                *o++ = (char)(0xc0 | (cp >> 6));
                *o++ = (char)(0x80 | (cp & 0x3f));
            } else if (cp < 0x10000) {
                *o++ = (char)(0xe0 | (cp >> 12));
                *o++ = (char)(0x80 | ((cp >> 6) & 0x3f));
                *o++ = (char)(0x80 | (cp & 0x3f));
            } else {
                *o++ = (char)(0xf0 | (cp >> 18));
                *o++ = (char)(0x80 | ((cp >> 12) & 0x3f));
                *o++ = (char)(0x80 | ((cp >> 6) & 0x3f));
                *o++ = (char)(0x80 | (cp & 0x3f));
            }
            break;
        }
        default: *o++ = x; break; /* " \ / */
        }
    }
    return (size_t)(o - buf);
}

typedef struct {
    const char *s;
    uint32_t n;
    uint8_t is_int;   /* no fraction, no exponent */
    uint8_t neg;
    uint8_t fits_i64; /* value below is exact */
    uint8_t fits_u64;
    uint8_t neg_zero;
    int64_t v;
} Num;

static int scan_number(const char **pp, const char *e, Num *out) {
    const char *p = *pp, *s = p;
    out->neg = 0;
    if (p < e && *p == '-') {
        out->neg = 1;
        p++;
    }
    if (p >= e) return 0;
    const char *d0 = p;
    uint64_t u = 0;
    if (*p == '0') {
        p++;
    } else if (*p >= '1' && *p <= '9') {
        /* up to 19 digits cannot overflow 64 bits */
        const char *lim = (e - p > 19) ? p + 19 : e;
        while (p < lim && (unsigned)(*p - '0') < 10) u = u * 10 + (uint64_t)(*p++ - '0');
        while (p < e && (unsigned)(*p - '0') < 10) p++;
    } else {
        return 0;
    }
    const char *d1 = p;
    out->is_int = 1;
    if (p < e && *p == '.') {
        out->is_int = 0;
        p++;
        if (p >= e || *p < '0' || *p > '9') return 0;
        while (p < e && *p >= '0' && *p <= '9') p++;
    }
    if (p < e && (*p == 'e' || *p == 'E')) {
        out->is_int = 0;
        p++;
        if (p < e && (*p == '+' || *p == '-')) p++;
        if (p >= e || *p < '0' || *p > '9') return 0;
        while (p < e && *p >= '0' && *p <= '9') p++;
    }
    out->s = s;
    out->n = (uint32_t)(p - s);
    out->fits_i64 = out->fits_u64 = 0;
    out->neg_zero = out->neg && (d1 - d0 == 1) && *d0 == '0';
    if (out->is_int) {
        ptrdiff_t nd = d1 - d0;
        int ok = nd <= 19;
        if (nd == 20) { /* the 20th digit may still fit an unsigned 64-bit value */
            uint64_t last = (uint64_t)(d0[19] - '0');
            ok = u <= (UINT64_MAX - last) / 10;
            if (ok) u = u * 10 + last;
        }
        if (ok) {
            if (!out->neg) {
                out->fits_u64 = 1;
                if (u <= (uint64_t)INT64_MAX) {
                    out->fits_i64 = 1;
                    out->v = (int64_t)u;
                }
            } else if (u <= (uint64_t)INT64_MAX + 1) {
                out->fits_i64 = 1;
                out->v = (u == (uint64_t)INT64_MAX + 1) ? INT64_MIN : -(int64_t)u;
            }
        }
    }
    *pp = p;
    return 1;
}

/* Bytes that can appear in a key without needing the full string scanner. */
static uint8_t PLAIN_KEY[256];

/* Keys the scanner reads, by their bytes packed into one little-endian word (every key it
   knows has at most 8 bytes): one multiply-shift probe instead of comparing strings. */
typedef struct {
    uint64_t w;
    int8_t code;
} KeyEnt;

/* A collision-free table: init_keys picks the multiplier, so a lookup is one slot and
   one compare (no probing loop for the unknown keys every line carries: id, tid, ...). */
#define TOPK_BITS 6
#define ARGK_BITS 8
typedef struct {
    uint64_t mul;
    unsigned shift;
    KeyEnt *t;
} KeyTab;
static KeyEnt TOPK_E[1 << TOPK_BITS], ARGK_E[1 << ARGK_BITS];
static KeyTab TOPK = {0, 64 - TOPK_BITS, TOPK_E}, ARGK = {0, 64 - ARGK_BITS, ARGK_E};

/* Fill tab with keys[i] -> codes[i]; 0 when no multiplier tried is collision-free. */
static int ktab_build(KeyTab *tab, const char *const *keys, const int *codes, size_t n) {
    size_t size = (size_t)1 << (64 - tab->shift);
    uint64_t mul = 0x9e3779b97f4a7c15ULL;
    for (int attempt = 0; attempt < 100000; attempt++) {
        memset(tab->t, 0, size * sizeof(KeyEnt));
        int ok = 1;
        for (size_t i = 0; i < n && ok; i++) {
            uint64_t w = 0;
            memcpy(&w, keys[i], strlen(keys[i]));
            KeyEnt *e = &tab->t[(w * mul) >> tab->shift];
            if (e->w) ok = 0;
            e->w = w;
            e->code = (int8_t)codes[i];
        }
        if (ok) {
            tab->mul = mul;
            return 1;
        }
        mul = mix64(mul + (uint64_t)attempt) | 1;
    }
    return 0;
}

/* The code of the key packed in w, or -1 (w == 0: the empty key or one longer than 8). */
static inline int klookup(const KeyTab *tab, uint64_t w) {
    const KeyEnt *e = &tab->t[(w * tab->mul) >> tab->shift];
    return (e->w == w && w) ? e->code : -1;
}

static int init_keys(void);

static int init_tables(void) {
    for (int c = 0; c < 256; c++) PLAIN_KEY[c] = (c >= 0x20 && c < 0x80 && c != '"' && c != '\\');
    return init_keys();
}

/* *pp points just after the opening quote of a key. */
static inline int scan_key(const char **pp, const char *e, Str *out) {
    const char *p = *pp, *s = p;
    while (p < e && PLAIN_KEY[(unsigned char)*p]) p++;
    if (p < e && *p == '"') {
        out->p = s;
        out->n = (uint32_t)(p - s);
        out->set = 1;
        out->esc = 0;
        *pp = p + 1;
        return 1;
    }
    return scan_string(pp, e, out);
}

/* *pp points just after the opening quote of a key.  Returns the key packed in a word
   (0 when longer than 8 bytes) in *w and 1, or 0 when the key is not one the scanner
   accepts (an escape, invalid UTF-8, an unterminated string).  The common case, a plain
   ASCII key of up to 8 bytes, is found with one 8-byte load; the line buffer is padded,
   so the load may run past the line. */
static inline int key_word(const char **pp, const char *e, uint64_t *w) {
    const char *p = *pp;
    if (p + 9 <= e) {
        uint64_t x;
        memcpy(&x, p, 8);
        uint64_t m = (has_zero_byte(x ^ 0x2222222222222222ULL) | has_zero_byte(x ^ 0x5c5c5c5c5c5c5c5cULL) |
                      ((x - 0x2020202020202020ULL) & ~x) | x) &
                     0x8080808080808080ULL;
        if (m) {
            unsigned pos = (unsigned)__builtin_ctzll(m) >> 3;
            if (p[pos] == '"') {
                *w = pos ? x & (~0ULL >> (64 - 8 * pos)) : 0;
                *pp = p + pos + 1;
                return 1;
            }
        } else if (p[8] == '"') {
            *w = x;
            *pp = p + 9;
            return 1;
        }
    }
    Str k;
    if (!scan_key(pp, e, &k) || k.esc) return 0;
    uint64_t x = 0;
    if (k.n <= 8) memcpy(&x, k.p, k.n);
    *w = x;
    return 1;
}

/* How many of the 8 bytes of w, from the lowest, are ASCII digits. */
static inline unsigned lead_digits8(uint64_t w) {
    uint64_t x = ((w & 0xf0f0f0f0f0f0f0f0ULL) ^ 0x3030303030303030ULL) |
                 (((w + 0x0606060606060606ULL) & 0xf0f0f0f0f0f0f0f0ULL) ^ 0x3030303030303030ULL);
    uint64_t nz = (x | ((x & 0x7f7f7f7f7f7f7f7fULL) + 0x7f7f7f7f7f7f7f7fULL)) & 0x8080808080808080ULL;
    return nz ? (unsigned)__builtin_ctzll(nz) >> 3 : 8;
}

/* The value of the first k (1..8) digit bytes of w. */
static inline uint64_t parse_digits(uint64_t w, unsigned k) {
    w <<= 8 * (8 - k); /* the shifted-in zero bytes read as leading zeros */
    w = ((w & 0x0f0f0f0f0f0f0f0fULL) * 2561) >> 8;
    w = ((w & 0x00ff00ff00ff00ffULL) * 6553601) >> 16;
    return ((w & 0x0000ffff0000ffffULL) * 42949672960001ULL) >> 32;
}

static const uint64_t POW10[9] = {1, 10, 100, 1000, 10000, 100000, 1000000, 10000000, 100000000};

/* A plain non-negative JSON integer of at most 18 digits (the common case), eight digits
   per step; 0 (nothing consumed) for anything else, which scan_number then judges. */
static inline int fast_uint(const char **pp, const char *e, int64_t *v) {
    const char *p = *pp;
    uint64_t w;
    memcpy(&w, p, 8);
    unsigned k = lead_digits8(w), n = k;
    if (k == 0 || (p[0] == '0' && k > 1)) return 0;
    uint64_t val = parse_digits(w, k);
    if (k == 8) {
        memcpy(&w, p + 8, 8);
        unsigned k2 = lead_digits8(w);
        if (k2) val = val * POW10[k2] + parse_digits(w, k2);
        n += k2;
        if (k2 == 8) {
            memcpy(&w, p + 16, 8);
            unsigned k3 = lead_digits8(w);
            if (k3 > 2) return 0; /* 19 digits or more: may not fit */
            if (k3) val = val * POW10[k3] + parse_digits(w, k3);
            n += k3;
        }
    }
    if (p + n >= e) return 0; /* the digits must end inside the line */
    char c = p[n];
    if (c == '.' || c == 'e' || c == 'E') return 0;
    *v = (int64_t)val;
    *pp = p + n;
    return 1;
}

static int skip_value(const char **pp, const char *e, int depth);

static int skip_container(const char **pp, const char *e, int depth, char close) {
    const char *p = skip_ws(*pp, e);
    if (depth > MAX_DEPTH) return 0;
    if (p < e && *p == close) {
        *pp = p + 1;
        return 1;
    }
    for (;;) {
        if (close == '}') {
            Str k;
            if (p >= e || *p != '"') return 0;
            p++;
            if (!scan_key(&p, e, &k)) return 0;
            p = skip_ws(p, e);
            if (p >= e || *p != ':') return 0;
            p = skip_ws(p + 1, e);
        }
        if (!skip_value(&p, e, depth + 1)) return 0;
        p = skip_ws(p, e);
        if (p >= e) return 0;
        if (*p == ',') {
            p = skip_ws(p + 1, e);
            continue;
        }
        if (*p == close) {
            *pp = p + 1;
            return 1;
        }
        return 0;
    }
}

static int skip_value(const char **pp, const char *e, int depth) {
    const char *p = *pp;
    if (p >= e) return 0;
    switch (*p) {
    case '"': {
        Str s;
        p++;
        if (!scan_string(&p, e, &s)) return 0;
        *pp = p;
        return 1;
    }
    case '{': p++; *pp = p; return skip_container(pp, e, depth, '}');
    case '[': p++; *pp = p; return skip_container(pp, e, depth, ']');
    case 't':
        if (e - p >= 4 && memcmp(p, "true", 4) == 0) { *pp = p + 4; return 1; }
        return 0;
    case 'f':
        if (e - p >= 5 && memcmp(p, "false", 5) == 0) { *pp = p + 5; return 1; }
        return 0;
    case 'n':
        if (e - p >= 4 && memcmp(p, "null", 4) == 0) { *pp = p + 4; return 1; }
        return 0;
    default: {
        int64_t v;
        if ((unsigned)(*p - '0') < 10 && fast_uint(pp, e, &v)) return 1;
        Num n;
        if (!scan_number(&p, e, &n)) return 0;
        *pp = p;
        return 1;
    }
    }
}

static inline int is_null_lit(const char **pp, const char *e) {
    const char *p = *pp;
    if (e - p >= 4 && memcmp(p, "null", 4) == 0) {
        *pp = p + 4;
        return 1;
    }
    return 0;
}

/* A BIGINT column: integer, canonical integer string, or null. */
static int read_i64(const char **pp, const char *e, I64 *out) {
    const char *p = *pp;
    if (p >= e) return 0;
    if (*p == 'n') {
        if (!is_null_lit(pp, e)) return 0;
        out->set = 0;
        return 1;
    }
    if (*p == '"') {
        Str s;
        p++;
        if (!scan_string(&p, e, &s) || s.esc || s.n == 0) return 0;
        const char *q = s.p;
        Num n;
        if (!scan_number(&q, s.p + s.n, &n) || q != s.p + s.n || !n.is_int || !n.fits_i64 || n.neg_zero)
            return 0;
        out->v = n.v;
        out->set = 1;
        *pp = p;
        return 1;
    }
    if ((unsigned)(*p - '0') < 10 && fast_uint(pp, e, &out->v)) {
        out->set = 1;
        return 1;
    }
    Num n;
    if (!scan_number(&p, e, &n) || !n.is_int || !n.fits_i64 || n.neg_zero) return 0;
    out->v = n.v;
    out->set = 1;
    *pp = p;
    return 1;
}

/* A VARCHAR column: string, integer (kept as its text), or null. */
static int read_txt(const char **pp, const char *e, Str *out) {
    const char *p = *pp;
    if (p >= e) return 0;
    if (*p == '"') {
        p++;
        if (!scan_string(&p, e, out)) return 0;
        *pp = p;
        return 1;
    }
    if (*p == 'n') {
        if (!is_null_lit(pp, e)) return 0;
        out->set = 0;
        return 1;
    }
    Num n;
    if (!scan_number(&p, e, &n) || !n.is_int || n.neg_zero || !(n.fits_i64 || n.fits_u64)) return 0;
    out->p = n.s;
    out->n = n.n;
    out->set = 1;
    out->esc = 0;
    *pp = p;
    return 1;
}

/* An object or array read into VARCHAR: DuckDB writes it back minified.  Accept only
   values whose minified form is the source minus whitespace (no escapes, integers only,
   ASCII), and write that form to scratch. */
static int read_json_text(const char **pp, const char *e, Str *out, char *scratch) {
    const char *p = *pp, *s = p;
    if (!skip_value(&p, e, 0)) return 0;
    char *o = scratch;
    int in_str = 0;
    for (const char *q = s; q < p; q++) {
        unsigned char c = (unsigned char)*q;
        if (c >= 0x80 || c == '\\') return 0;
        if (in_str) {
            if (c == '"') in_str = 0;
            *o++ = (char)c;
            continue;
        }
        if (c == '"') {
            in_str = 1;
            *o++ = (char)c;
        } else if (c == ' ' || c == '\t') {
            continue;
        } else if (c == '.' || ((c == 'e' || c == 'E') && o > scratch && o[-1] >= '0' && o[-1] <= '9')) {
            return 0; /* a fraction or exponent: DuckDB may print it differently */
        } else if (c == '-' && q + 2 <= p && q[1] == '0' && (q + 2 == p || q[2] < '0' || q[2] > '9')) {
            return 0; /* -0 */
        } else {
            *o++ = (char)c;
        }
    }
    out->p = scratch;
    out->n = (uint32_t)(o - scratch);
    out->set = 1;
    out->esc = 0;
    *pp = p;
    return 1;
}

#define ARG_TXT 16 /* ARGK codes: ai index, or ARG_TXT + at index */

/* dftracer writes the keys of a kind of line in the same order, so the keys seen at
   field i of earlier lines predict the one at field i of this line: when the next bytes
   are such a key and its closing quote (a masked 8-byte compare), its code is known
   without finding the quote and probing the table.  Each field keeps its two most recent
   keys (events and metadata lines alternate at the top level); the args keys are kept
   per event name (a read's args differ from a pread64's).  Keys of up to 7 bytes. */
#define NPRED 32
#define NAME_SLOTS 16
typedef struct {
    uint64_t w, mask;
    uint32_t len; /* key bytes + closing quote; 0 = no prediction */
    int32_t code;
} KeyPred;

typedef KeyPred KeyPreds[NPRED][2];

typedef struct {
    KeyPreds top, args[NAME_SLOTS];
} Preds;

/* *pp is just after a key's opening quote: the key's code (-1 for a key the scanner does
   not read) with *pp after its closing quote, or -2 for a key it cannot accept. */
static inline int next_key(const char **pp, const char *e, KeyPreds kp, unsigned i, const KeyTab *tab) {
    const char *p = *pp;
    KeyPred *k = i < NPRED ? kp[i] : NULL;
    if (k) {
        uint64_t x;
        memcpy(&x, p, 8);
        if (k[0].len && p + k[0].len < e && (x & k[0].mask) == k[0].w) {
            *pp = p + k[0].len;
            return k[0].code;
        }
        if (k[1].len && p + k[1].len < e && (x & k[1].mask) == k[1].w) {
            KeyPred hit = k[1];
            k[1] = k[0];
            k[0] = hit;
            *pp = p + hit.len;
            return hit.code;
        }
    }
    uint64_t w;
    if (!key_word(pp, e, &w)) return -2;
    int code = klookup(tab, w);
    if (k) {
        size_t n = (size_t)(*pp - p) - 1;
        k[1] = k[0];
        if (n <= 7) {
            k[0].w = w | ((uint64_t)'"' << (8 * n));
            k[0].mask = n == 7 ? ~0ULL : ((1ULL << (8 * (n + 1))) - 1);
            k[0].len = (uint32_t)(n + 1);
            k[0].code = code;
        } else {
            k[0].len = 0;
        }
    }
    return code;
}

static int init_keys(void) {
    static const char *const top[] = {"ts", "ph", "cat", "pid", "dur", "name", "args"};
    static const int top_codes[] = {0, 1, 2, 3, 4, 5, 6};
    static const char *const args[] = {"ret", "offset", "size", "whence", "flags", "rank", "dft_cnt", "dur",
                                       "dur_sum", "ret_sum", "size_min", "size_max", "fhash", "hhash", "fname",
                                       "hostname", "name", "value", "mode", "epoch", "step", "cmd_hash",
                                       "version", "cfg"};
    static const int arg_codes[] = {A_RET, A_OFFSET, A_SIZE, A_WHENCE, A_FLAGS, A_RANK, A_DFTCNT, A_DUR,
                                    A_DURSUM, A_RETSUM, A_SIZEMIN, A_SIZEMAX, ARG_TXT + T_FHASH,
                                    ARG_TXT + T_HHASH, ARG_TXT + T_FNAME, ARG_TXT + T_HOSTNAME, ARG_TXT + T_NAME,
                                    ARG_TXT + T_VALUE, ARG_TXT + T_MODE, ARG_TXT + T_EPOCH, ARG_TXT + T_STEP,
                                    ARG_TXT + T_CMDHASH, ARG_TXT + T_VERSION, ARG_TXT + T_CFG};
    return ktab_build(&TOPK, top, top_codes, 7) && ktab_build(&ARGK, args, arg_codes, 24);
}

static int parse_args(const char **pp, const char *e, Ev *ev, char *scratch, KeyPreds kp) {
    const char *p = skip_ws(*pp, e);
    uint32_t seen = 0;
    if (p < e && *p == '}') {
        *pp = p + 1;
        return 1;
    }
    for (unsigned field = 0;; field++) {
        if (p >= e || *p != '"') return 0;
        p++;
        int code = next_key(&p, e, kp, field, &ARGK);
        if (code == -2) return 0;
        if (*p != ':') {
            p = skip_ws(p, e);
            if (p >= e || *p != ':') return 0;
        }
        p++;
        if (p < e && (*p == ' ' || *p == '\t')) p = skip_ws(p, e);
        int ai = code >= 0 && code < ARG_TXT ? code : -1, at = code >= ARG_TXT ? code - ARG_TXT : -1;
        if (ai >= 0) {
            uint32_t bit = 1u << ai;
            if (seen & bit) return 0;
            seen |= bit;
            if (!read_i64(&p, e, &ev->ai[ai])) return 0;
        } else if (at >= 0) {
            uint32_t bit = 1u << (N_AINT + at);
            if (seen & bit) return 0;
            seen |= bit;
            if (at == T_CFG && p < e && (*p == '{' || *p == '[')) {
                if (!read_json_text(&p, e, &ev->at[at], scratch)) return 0;
            } else if (!read_txt(&p, e, &ev->at[at])) {
                return 0;
            }
        } else {
            if (!skip_value(&p, e, 1)) return 0;
        }
        p = skip_ws(p, e);
        if (p >= e) return 0;
        if (*p == ',') {
            p = skip_ws(p + 1, e);
            continue;
        }
        if (*p == '}') {
            *pp = p + 1;
            return 1;
        }
        return 0;
    }
}

/* Parse one JSON line into ev.  Returns 1 on success, 0 when the line must go to DuckDB. */
static inline void ev_reset(Ev *ev) {
    ev->name.set = ev->cat.set = ev->ph.set = 0;
    ev->pid.set = ev->ts.set = ev->dur.set = 0;
    ev->has_args = 0;
    for (int i = 0; i < N_AINT; i++) ev->ai[i].set = 0;
    for (int i = 0; i < N_ATXT; i++) ev->at[i].set = 0;
}

/* Parse one JSON line into ev.  Returns 1 on success, 0 when the line must go to DuckDB. */
static NOINL int parse_line(const char *p, const char *e, Ev *ev, char *scratch, Preds *pr) {
    ev_reset(ev);
    uint32_t seen = 0;
    p = skip_ws(p, e);
    if (p >= e || *p != '{') return 0;
    p = skip_ws(p + 1, e);
    if (p < e && *p == '}') return 0;
    for (unsigned field = 0;; field++) {
        if (p >= e || *p != '"') return 0;
        p++;
        int which = next_key(&p, e, pr->top, field, &TOPK);
        if (which == -2) return 0;
        if (*p != ':') {
            p = skip_ws(p, e);
            if (p >= e || *p != ':') return 0;
        }
        p++;
        if (p < e && (*p == ' ' || *p == '\t')) p = skip_ws(p, e);
        if (which >= 0) {
            if (seen & (1u << which)) return 0;
            seen |= 1u << which;
        }
        int ok = 1;
        switch (which) {
        case 0: ok = read_i64(&p, e, &ev->ts); break;
        case 1: ok = read_txt(&p, e, &ev->ph); break;
        case 2: ok = read_txt(&p, e, &ev->cat); break;
        case 3: ok = read_i64(&p, e, &ev->pid); break;
        case 4: ok = read_i64(&p, e, &ev->dur); break;
        case 5: ok = read_txt(&p, e, &ev->name); break;
        case 6:
            if (p < e && *p == '{') {
                p++;
                ev->has_args = 1;
                unsigned slot = 0;
                if (ev->name.set && ev->name.n) {
                    const unsigned char *s = (const unsigned char *)ev->name.p;
                    slot = (ev->name.n * 5u + s[0] + s[ev->name.n - 1] * 3u) % NAME_SLOTS;
                }
                ok = parse_args(&p, e, ev, scratch, pr->args[slot]);
            } else {
                ok = is_null_lit(&p, e);
            }
            break;
        default: ok = skip_value(&p, e, 1); break;
        }
        if (!ok) return 0;
        p = skip_ws(p, e);
        if (p >= e) return 0;
        if (*p == ',') {
            p = skip_ws(p + 1, e);
            continue;
        }
        if (*p == '}') {
            p = skip_ws(p + 1, e);
            return p == e;
        }
        return 0;
    }
}

/* ------------------------------------------------------------------------------ */
/* per-file state                                                                  */

typedef struct {
    int64_t v;
    int64_t n; /* non-null contributions: 0 means SQL NULL */
} Sum;

typedef struct {
    int64_t count[NFAM];
    Sum bytes[NFAM];
    Sum time[NFAM];
} FamCols;

typedef struct { /* b_fam row, per DuckDB batch and family */
    int64_t count, sized, small, bw_n, no_args;
    Sum bytes, time, small_time;
    double bw_sum;
} FamRow;

typedef struct {
    int64_t records;
    Sum count, bytes, time;
} AggRow;

typedef struct {
    uint32_t fkey;
    uint8_t is_path;
    uint32_t last_proc; /* 1 + the last process seen on it: its (file, process) pair is recorded */
    FamCols f;
} PathRow;

typedef struct {
    uint32_t hkey, cmd_hash;
    uint8_t host_inline, pid_set, cmd_conflict;
    int64_t pid, events, first_ts, last_end;
    Sum rank; /* max */
    int64_t io;
    FamCols f;
} ProcRow;

typedef struct {
    uint32_t cat, name;
    int64_t count;
    Sum time;
} NameRow;

typedef struct {
    uint32_t cat;
    int64_t count, first_ts, last_end, ckpt;
    Sum time;
} LayerRow;

typedef struct {
    uint32_t proc, epoch;
    uint8_t host_inline;
    int64_t first_ts, last_end;
} EpochRow;

typedef struct {
    uint32_t ucat;
    int fam;
    int64_t count;
    Sum bytes, time;
} IfaceRow;

typedef struct {
    int kind;
    uint32_t h, v;
} MetaRow;

typedef struct { /* an I/O call the position pass needs, in file order (40 bytes) */
    int64_t ts, nb, dur;
    int64_t pos;  /* the offset argument (positional calls) or the position set (setters) */
    uint32_t g;   /* (process, file) group; its file key is St.gfk[g] */
    int8_t kind;
    uint8_t is_write;
} PosRec;

typedef struct {
    int64_t s, e;
    uint32_t g;
} Span;

typedef struct {
    int64_t consecutive, sequential, random, positioned, misaligned;
    Sum random_time, misaligned_time;
} AccRow;

/* name / category properties, computed once per interned id */
#define NP_DONE 0x1
#define NP_COMPUTE 0x2
#define NP_CKPT 0x4
#define NP_STARTEND 0x8
#define NP_START 0x10
#define NP_NONASCII 0x20
typedef struct {
    uint8_t flags, fam, role, item, setter, meta; /* meta: 1 FH, 2 HH, 3 SH */
} NameProp;

#define CP_DONE 0x1
#define CP_IO 0x2
#define CP_DFT 0x4
#define CP_COMPUTE 0x8
#define CP_CKPT 0x10
#define CP_NONASCII 0x20
typedef struct {
    uint8_t flags;
    uint32_t ucat;
} CatProp;

typedef struct {
    const Config *cfg;
    int scale; /* 0 us, 1 ns, 2 ms, 3 s */
    int file_view;
    int time_on;
    /* time view: I/O calls binned by ts >> t_shift on the absolute power-of-two grid, in a ring of
       t_cap (a power of two) bins; t_shift grows (merging bin pairs) while the bins held would span
       t_cap or more, so it ends as the least shift whose span fits (see views.py) */
    int64_t t_cap, t_lo, t_hi;
    int t_shift;
    uint8_t t_any;
    int64_t batch_rows;
    int64_t row_idx; /* DuckDB row number of the current line (blank lines have none) */
    const char *why;

    Interner str;
    NameProp *np;
    CatProp *cp;
    size_t prop_cap;

    /* counts */
    int64_t rows, events, metadata_lines, counter_events, aggregated_events, legacy_rows, v2_rows;
    int64_t first_ts, last_end;
    uint8_t have_ts;

    FamRow *famrows; /* [batch * NFAM + fam] */
    size_t nfamrows, famcap;
    uint8_t *famrow_used;

    AggRow agg[NFAM];
    uint8_t agg_used[NFAM];
    int64_t hist_count[2][MAX_BINS];
    Sum hist_bytes[2][MAX_BINS];

    Map path_map;
    PathRow *path;
    size_t npath, pathcap;
    Map pathproc;

    Map proc_map;
    ProcRow *proc;
    size_t nproc, proccap;

    Map name_map;
    NameRow *names;
    size_t nnames, namecap;

    Map layer_map;
    LayerRow *layer;
    size_t nlayer, layercap;

    Map epoch_map;
    EpochRow *epochs;
    size_t nepochs, epochcap;
    Map steps; /* distinct (epoch, step) */

    Map iface_map;
    IfaceRow *iface;
    size_t niface, ifacecap;

    Map meta_map;
    MetaRow *meta;
    size_t nmeta, metacap;

    uint32_t version, cfgtxt; /* first non-empty of the start/end events */

    int64_t *time_count, *time_count2; /* [t_cap * NFAM]; *2: the spare ring a coarsening fills */
    Sum *time_bytes, *time_time, *time_bytes2, *time_time2;

    Map gfile_map;
    uint32_t *gfk; /* file key of each (process, file) group */
    size_t ngfk, gfkcap;

    PosRec *pos;
    size_t npos, poscap;
    Span *iospan, *cspan;
    size_t nio, niocap, ncs, ncscap;

    char *scratch;
    size_t scratch_cap;

    uint32_t icache_id[64], icache_n[64]; /* recently interned strings, by a cheap hash */
    struct {
        uint64_t a, b;
        uint32_t n, id;
    } scache[256];                  /* recently interned strings of up to 16 bytes, by value */
    const char *buf_lo, *buf_hi; /* the padded line buffer: 16-byte loads inside it are safe */
    Preds preds;                  /* each field's key on the previous line */
    MapCache c_proc, c_path, c_gfile, c_epoch, c_steps, c_layer[8], c_names[8], c_iface[NFAM];

    uint32_t last_hkey; /* cache: hkey strings repeat on every line */
    const char *last_hkey_raw;
    char *last_hkey_buf;
    uint32_t last_hkey_n, last_hkey_cap;
} St;

#define FAILWITH(msg) \
    do {              \
        st->why = msg; \
        return 0;     \
    } while (0)

static const char *const FAIL_OOM = "out of memory";
static const char *const FAIL_OVERFLOW = "an integer sum or product overflows 64 bits";

static inline int add_ovf(int64_t *acc, int64_t v) { return __builtin_add_overflow(*acc, v, acc); }

static inline int sum_add(Sum *s, int64_t v) {
    s->n++;
    return __builtin_add_overflow(s->v, v, &s->v);
}

static inline int sum_merge(Sum *a, const Sum *b) {
    a->n += b->n;
    return __builtin_add_overflow(a->v, b->v, &a->v);
}

/* One step coarser on the time grid: bin j becomes j >> 1 (pairs merge exactly).  The span held
   halves, so the spare ring holds it; 0 on an overflowing sum. */
static int time_coarsen(St *st) {
    uint64_t mask = (uint64_t)st->t_cap - 1;
    for (int64_t j = st->t_lo;; j++) {
        size_t s = (size_t)((uint64_t)j & mask) * NFAM, d = (size_t)((uint64_t)(j >> 1) & mask) * NFAM;
        for (int f = 0; f < NFAM; f++) {
            if (!st->time_count[s + f]) continue;
            st->time_count2[d + f] += st->time_count[s + f];
            if (sum_merge(&st->time_bytes2[d + f], &st->time_bytes[s + f]) ||
                sum_merge(&st->time_time2[d + f], &st->time_time[s + f]))
                return 0;
        }
        if (j == st->t_hi) break;
    }
    size_t n = (size_t)st->t_cap * NFAM;
    memset(st->time_count, 0, n * sizeof(int64_t));
    memset(st->time_bytes, 0, n * sizeof(Sum));
    memset(st->time_time, 0, n * sizeof(Sum));
    int64_t *c = st->time_count;
    Sum *b = st->time_bytes, *t = st->time_time;
    st->time_count = st->time_count2;
    st->time_bytes = st->time_bytes2;
    st->time_time = st->time_time2;
    st->time_count2 = c;
    st->time_bytes2 = b;
    st->time_time2 = t;
    st->t_lo >>= 1;
    st->t_hi >>= 1;
    st->t_shift++;
    return 1;
}

static int ensure_props(St *st, uint32_t id) {
    if (id < st->prop_cap) return 1;
    size_t nc = st->prop_cap ? st->prop_cap : 256;
    while (nc <= id) nc *= 2;
    NameProp *np = realloc(st->np, nc * sizeof(NameProp));
    if (!np) return 0;
    st->np = np;
    CatProp *cp = realloc(st->cp, nc * sizeof(CatProp));
    if (!cp) return 0;
    st->cp = cp;
    memset(st->np + st->prop_cap, 0, (nc - st->prop_cap) * sizeof(NameProp));
    memset(st->cp + st->prop_cap, 0, (nc - st->prop_cap) * sizeof(CatProp));
    st->prop_cap = nc;
    return 1;
}

static int contains_ci(const char *s, size_t n, const char *sub) {
    size_t m = strlen(sub);
    if (m == 0) return 1;
    for (size_t i = 0; i + m <= n; i++) {
        size_t j = 0;
        while (j < m) {
            char c = s[i + j];
            if (c >= 'A' && c <= 'Z') c = (char)(c - 'A' + 'a');
            if (c != sub[j]) break;
            j++;
        }
        if (j == m) return 1;
    }
    return 0;
}

static int eq_ci_upper(const char *s, size_t n, const char *upper) {
    if (strlen(upper) != n) return 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (c >= 'a' && c <= 'z') c = (char)(c - 'a' + 'A');
        if (c != upper[i]) return 0;
    }
    return 1;
}

static int eq_ci_lower(const char *s, size_t n, const char *lower) {
    if (strlen(lower) != n) return 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (c >= 'A' && c <= 'Z') c = (char)(c - 'A' + 'a');
        if (c != lower[i]) return 0;
    }
    return 1;
}

static int ascii(const char *s, size_t n) {
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] >= 0x80) return 0;
    return 1;
}

static const NameProp *name_prop(St *st, uint32_t id) {
    NameProp *p = &st->np[id];
    if (p->flags & NP_DONE) return p;
    const char *s = istr(&st->str, id);
    size_t n = st->str.len[id];
    const Config *c = st->cfg;
    p->flags = NP_DONE;
    if (!ascii(s, n)) p->flags |= NP_NONASCII;
    p->fam = FAM_META;
    p->role = ROLE_OTHER;
    p->item = 0;
    p->setter = 0;
    for (size_t i = 0; i < c->ncalls; i++) {
        if (strlen(c->calls[i].name) == n && memcmp(c->calls[i].name, s, n) == 0) {
            p->fam = c->calls[i].fam;
            p->role = c->calls[i].role;
            p->item = c->calls[i].item;
            p->setter = c->calls[i].setter;
            break;
        }
    }
    if (contains_ci(s, n, c->compute_sub)) p->flags |= NP_COMPUTE;
    if (contains_ci(s, n, "checkpoint") && !contains_ci(s, n, "init")) p->flags |= NP_CKPT;
    if (n == 5 && memcmp(s, "start", 5) == 0) p->flags |= NP_START | NP_STARTEND;
    if (n == 3 && memcmp(s, "end", 3) == 0) p->flags |= NP_STARTEND;
    p->meta = 0;
    if (n == 2 && s[1] == 'H') p->meta = s[0] == 'F' ? 1 : s[0] == 'H' ? 2 : s[0] == 'S' ? 3 : 0;
    return p;
}

static const CatProp *cat_prop(St *st, uint32_t id) {
    CatProp *p = &st->cp[id];
    if (p->flags & CP_DONE) return p;
    const char *s = istr(&st->str, id);
    size_t n = st->str.len[id];
    const Config *c = st->cfg;
    p->flags = CP_DONE;
    if (!ascii(s, n)) {
        p->flags |= CP_NONASCII;
        return p;
    }
    for (int i = 0; i < c->nio; i++)
        if (eq_ci_upper(s, n, c->io_cats[i])) p->flags |= CP_IO;
    if (eq_ci_upper(s, n, "DFTRACER")) p->flags |= CP_DFT;
    for (int i = 0; i < c->ncompute; i++)
        if (eq_ci_lower(s, n, c->compute_cats[i])) p->flags |= CP_COMPUTE;
    if (eq_ci_lower(s, n, "checkpoint")) p->flags |= CP_CKPT;
    if (p->flags & CP_IO) {
        char up[64];
        if (n >= sizeof(up)) {
            p->ucat = 0;
        } else {
            for (size_t i = 0; i < n; i++) up[i] = (s[i] >= 'a' && s[i] <= 'z') ? (char)(s[i] - 32) : s[i];
            uint32_t u = intern(&st->str, up, n);
            p->ucat = u;
            /* interning may have grown the table: the caller re-reads props by id */
        }
    }
    return p;
}

/* Intern a raw string view (decoding escapes first). 0 on failure (OOM). */
static inline uint32_t intern_cached(St *st, const char *p, size_t n) {
    if (n <= 16 && p >= st->buf_lo && p + 16 <= st->buf_hi) {
        /* names, categories and hashes: two masked 8-byte loads, compared by value */
        uint64_t a, b;
        memcpy(&a, p, 8);
        memcpy(&b, p + 8, 8);
        if (n < 8) {
            a = n ? a & (~0ULL >> (64 - 8 * n)) : 0;
            b = 0;
        } else if (n < 16) {
            b = n > 8 ? b & (~0ULL >> (64 - 8 * (n - 8))) : 0;
        }
        size_t k = (size_t)(mix64(a ^ (b * 0x9e3779b97f4a7c15ULL) ^ n) & 255);
        if (st->scache[k].id && st->scache[k].a == a && st->scache[k].b == b && st->scache[k].n == n)
            return st->scache[k].id;
        uint32_t id = intern(&st->str, p, n);
        if (id) {
            st->scache[k].a = a;
            st->scache[k].b = b;
            st->scache[k].n = (uint32_t)n;
            st->scache[k].id = id;
        }
        return id;
    }
    if (n == 0) return intern(&st->str, p, n);
    const unsigned char *u = (const unsigned char *)p;
    size_t k = (n * 7 + u[0] * 31u + u[n - 1] * 131u + u[n > 2 ? n - 3 : 0] * 17u + u[n / 2] * 5u) & 63;
    uint32_t id = st->icache_id[k];
    if (id && st->icache_n[k] == n && memcmp(istr(&st->str, id), p, n) == 0) return id;
    id = intern(&st->str, p, n);
    st->icache_id[k] = id;
    st->icache_n[k] = (uint32_t)n;
    return id;
}

static uint32_t intern_str(St *st, const Str *s) {
    if (!s->set) return 0;
    if (!s->esc) return intern_cached(st, s->p, s->n);
    if (s->n > st->scratch_cap) return 0;
    /* the scratch buffer may hold the cfg text of this line: decode after it */
    char *buf = st->scratch + st->scratch_cap;
    size_t n = unescape(s, buf);
    return intern(&st->str, buf, n);
}

static uint32_t hkey_id(St *st, const Str *s) {
    if (!s->set) return 0;
    if (!s->esc && s->n <= 16) return intern_cached(st, s->p, s->n);
    if (!s->esc && st->last_hkey && s->n == st->last_hkey_n && memcmp(s->p, st->last_hkey_buf, s->n) == 0)
        return st->last_hkey;
    uint32_t id = intern_str(st, s);
    if (id && !s->esc) {
        if (s->n > st->last_hkey_cap) {
            char *b = realloc(st->last_hkey_buf, s->n + 1);
            if (!b) return id;
            st->last_hkey_buf = b;
            st->last_hkey_cap = s->n;
        }
        memcpy(st->last_hkey_buf, s->p, s->n);
        st->last_hkey_n = s->n;
        st->last_hkey = id;
    }
    return id;
}

static int scale_time(int scale, int64_t *v) {
    int64_t x = *v;
    switch (scale) {
    case 0: return 1;
    case 1: { /* NS: round(x * 0.001), half away from zero (DuckDB decimal arithmetic) */
        int64_t q = x / 1000, r = x % 1000;
        if (r >= 500) q++;
        else if (r <= -500) q--;
        *v = q;
        return 1;
    }
    case 2: return !__builtin_mul_overflow(x, (int64_t)1000, v);
    case 3: return !__builtin_mul_overflow(x, (int64_t)1000000, v);
    default: return 0;
    }
}

static int size_bin(const Config *c, int64_t nb) {
    for (int i = c->nbins - 1; i > 0; i--)
        if (nb >= c->bins[i]) return i;
    return 0;
}

static int famcols_add(FamCols *f, int fam, const I64 *nbytes, int64_t dur) {
    f->count[fam]++;
    if (nbytes->set && sum_add(&f->bytes[fam], nbytes->v)) return 0;
    if (sum_add(&f->time[fam], dur)) return 0;
    return 1;
}

static uint32_t proc_slot(St *st, uint32_t hkey, const I64 *pid, uint8_t host_inline, int *ok) {
    int added;
    uint64_t a = (uint64_t)hkey | ((uint64_t)(pid->set ? 1 : 0) << 32);
    uint32_t slot = map_get_c(&st->proc_map, &st->c_proc, a, pid->set ? (uint64_t)pid->v : 0, &added);
    *ok = 1;
    if (!slot) {
        *ok = 0;
        st->why = FAIL_OOM;
        return 0;
    }
    if (added) {
        GROW(st->proc, st->nproc, st->proccap, st->nproc + 1, oom);
        ProcRow *r = &st->proc[st->nproc++];
        memset(r, 0, sizeof(*r));
        r->hkey = hkey;
        r->pid_set = pid->set;
        r->pid = pid->set ? pid->v : 0;
        r->host_inline = host_inline;
        r->first_ts = INT64_MAX;
        r->last_end = INT64_MIN;
    } else if (st->proc[slot - 1].host_inline != host_inline && hkey) {
        *ok = 0;
        st->why = "a host key appears both inline and hashed for one process";
        return 0;
    }
    return slot - 1;
oom:
    *ok = 0;
    st->why = FAIL_OOM;
    return 0;
}

static FamRow *fam_row(St *st, int fam) {
    size_t b = (size_t)(st->row_idx / st->batch_rows);
    size_t need = (b + 1) * NFAM;
    if (need > st->nfamrows) {
        if (need > st->famcap) {
            size_t nc = st->famcap ? st->famcap * 2 : 8 * NFAM;
            while (nc < need) nc *= 2;
            FamRow *r = realloc(st->famrows, nc * sizeof(FamRow));
            if (!r) return NULL;
            st->famrows = r;
            uint8_t *u = realloc(st->famrow_used, nc);
            if (!u) return NULL;
            st->famrow_used = u;
            st->famcap = nc;
        }
        memset(st->famrows + st->nfamrows, 0, (need - st->nfamrows) * sizeof(FamRow));
        memset(st->famrow_used + st->nfamrows, 0, need - st->nfamrows);
        st->nfamrows = need;
    }
    st->famrow_used[b * NFAM + fam] = 1;
    return &st->famrows[b * NFAM + fam];
}

static int mode_is_append(St *st, const Str *m) {
    if (!m->set || m->n == 0) return 0;
    if (!m->esc) return m->p[0] == 'a';
    char *buf = st->scratch + st->scratch_cap;
    size_t n = unescape(m, buf);
    return n > 0 && buf[0] == 'a';
}

static NOINL int process_event(St *st, Ev *ev) {
    const Config *c = st->cfg;
    if (!ev->ph.set || !ev->name.set) FAILWITH("an event without 'ph' or 'name'");
    int k = 0, legacy = 0;
    if (ev->ph.n == 1 && !ev->ph.esc) {
        switch (ev->ph.p[0]) {
        case 'X': k = 1; legacy = 1; break;
        case '1': k = 1; break;
        case 'M': k = 4; legacy = 1; break;
        case '4': k = 4; break;
        case '3': k = 3; break;
        case 'C':
        case '2': k = 2; break;
        default: k = 0;
        }
    }
    if (ev->ts.set && !scale_time(st->scale, &ev->ts.v)) FAILWITH(FAIL_OVERFLOW);
    if (ev->dur.set && !scale_time(st->scale, &ev->dur.v)) FAILWITH(FAIL_OVERFLOW);
    if (k == 1 && (!ev->ts.set || !ev->dur.set || ev->dur.v < 0))
        FAILWITH("a complete event without a usable ts or dur");
    if ((ev->ts.set && (ev->ts.v < -c->max_ts || ev->ts.v > c->max_ts)) ||
        (ev->dur.set && (ev->dur.v < 0 || ev->dur.v > c->max_value)) ||
        (ev->pid.set && (ev->pid.v < -c->max_value || ev->pid.v > c->max_value)))
        FAILWITH("a number outside the trace limits");
    for (int i = 0; i < N_AINT; i++)
        if (ev->ai[i].set && (ev->ai[i].v < -c->max_value || ev->ai[i].v > c->max_value))
            FAILWITH("a number outside the trace limits");
    st->rows++;
    if (legacy) st->legacy_rows++;
    else st->v2_rows++;

    uint32_t name = intern_str(st, &ev->name);
    uint32_t cat = ev->cat.set ? intern_str(st, &ev->cat) : 0;
    if (!name || (ev->cat.set && !cat)) FAILWITH(FAIL_OOM);
    if (!ensure_props(st, name > cat ? name : cat)) FAILWITH(FAIL_OOM);
    const NameProp *np = name_prop(st, name);
    uint8_t cflags = 0;
    uint32_t ucat = 0;
    if (cat) {
        const CatProp *cp = cat_prop(st, cat);
        cflags = cp->flags;
        ucat = cp->ucat;
        if ((cflags & CP_IO) && !ucat) FAILWITH(FAIL_OOM);
    }
    if ((np->flags & NP_NONASCII) || (cflags & CP_NONASCII))
        FAILWITH("a non-ASCII event name or category (case rules differ)");
    int is_io = (cflags & CP_IO) != 0;

    if (k == 4) {
        st->metadata_lines++;
        if (np->meta && ev->at[T_VALUE].set) {
            uint32_t h = intern_str(st, &ev->at[T_VALUE]);
            uint32_t v = ev->at[T_NAME].set ? intern_str(st, &ev->at[T_NAME]) : 0;
            if (!h || (ev->at[T_NAME].set && !v)) FAILWITH(FAIL_OOM);
            int added;
            uint32_t slot = map_get(&st->meta_map, np->meta, h, &added);
            if (!slot) FAILWITH(FAIL_OOM);
            if (added) {
                GROW(st->meta, st->nmeta, st->metacap, st->nmeta + 1, oom);
                st->meta[st->nmeta++] = (MetaRow){np->meta, h, v};
            } else {
                /* DuckDB's any_value: the first non-null name in file order wins */
                MetaRow *r = &st->meta[slot - 1];
                if (!r->v) r->v = v;
            }
        }
        return 1;
    }
    if (k == 2) {
        st->counter_events++;
        return 1;
    }
    if (k == 3) {
        st->aggregated_events++;
        if (!is_io) return 1;
        int fam = np->fam;
        AggRow *a = &st->agg[fam];
        st->agg_used[fam] = 1;
        a->records++;
        if (ev->ai[A_DFTCNT].set && sum_add(&a->count, ev->ai[A_DFTCNT].v)) FAILWITH(FAIL_OVERFLOW);
        I64 ret = ev->ai[A_RETSUM].set ? ev->ai[A_RETSUM] : ev->ai[A_RET];
        if (ret.set) {
            int64_t b;
            int known = 1;
            if (ret.v <= 0) {
                b = 0;
            } else if (np->item) {
                I64 lo = ev->ai[A_SIZEMIN].set ? ev->ai[A_SIZEMIN] : ev->ai[A_SIZE];
                I64 hi = ev->ai[A_SIZEMAX].set ? ev->ai[A_SIZEMAX] : ev->ai[A_SIZE];
                if (lo.set && hi.set && lo.v == hi.v) {
                    if (__builtin_mul_overflow(ret.v, hi.v, &b)) FAILWITH(FAIL_OVERFLOW);
                } else {
                    known = 0;
                    b = 0;
                }
            } else {
                b = ret.v;
            }
            if (known && sum_add(&a->bytes, b)) FAILWITH(FAIL_OVERFLOW);
        }
        I64 d = ev->ai[A_DURSUM].set ? ev->ai[A_DURSUM] : ev->ai[A_DUR];
        if (d.set) {
            if (!scale_time(st->scale, &d.v)) FAILWITH(FAIL_OVERFLOW);
            if (sum_add(&a->time, d.v)) FAILWITH(FAIL_OVERFLOW);
        }
        return 1;
    }
    if (k != 1) return 1;

    /* ---- complete event ---- */
    st->events++;
    int64_t ts = ev->ts.v, dur = ev->dur.v, end;
    if (__builtin_add_overflow(ts, dur, &end)) FAILWITH(FAIL_OVERFLOW);
    if (!st->have_ts || ts < st->first_ts) st->first_ts = ts;
    if (!st->have_ts || end > st->last_end) st->last_end = end;
    st->have_ts = 1;

    const Str *hs = ev->at[T_HOSTNAME].set ? &ev->at[T_HOSTNAME] : &ev->at[T_HHASH];
    uint8_t host_inline = ev->at[T_HOSTNAME].set;
    uint32_t hkey = hkey_id(st, hs);
    if (hs->set && !hkey) FAILWITH(FAIL_OOM);
    int ok;
    uint32_t pi = proc_slot(st, hkey, &ev->pid, host_inline, &ok);
    if (!ok) return 0;
    ProcRow *pr = &st->proc[pi];
    pr->events++;
    if (ts < pr->first_ts) pr->first_ts = ts;
    if (end > pr->last_end) pr->last_end = end;
    if (ev->ai[A_RANK].set) {
        if (!pr->rank.n || ev->ai[A_RANK].v > pr->rank.v) pr->rank.v = ev->ai[A_RANK].v;
        pr->rank.n++;
    }
    int dft = (cflags & CP_DFT) != 0;
    if ((np->flags & NP_START) && dft && ev->at[T_CMDHASH].set) {
        uint32_t ch = intern_str(st, &ev->at[T_CMDHASH]);
        if (!ch) FAILWITH(FAIL_OOM);
        if (!pr->cmd_hash) pr->cmd_hash = ch;
        else if (pr->cmd_hash != ch) FAILWITH("a process has two different command hashes");
    }
    if ((np->flags & NP_STARTEND) && dft) {
        const Str *v = &ev->at[T_VERSION], *g = &ev->at[T_CFG];
        if (!st->version && v->set && v->n > 0) {
            st->version = intern_str(st, v);
            if (!st->version) FAILWITH(FAIL_OOM);
        }
        if (!st->cfgtxt && g->set && g->n > 0) {
            st->cfgtxt = intern_str(st, g);
            if (!st->cfgtxt) FAILWITH(FAIL_OOM);
        }
    }
    if (cat && !dft) { /* layer */
        int added;
        uint32_t slot = map_get_c(&st->layer_map, &st->c_layer[cat & 7], cat, 0, &added);
        if (!slot) FAILWITH(FAIL_OOM);
        if (added) {
            GROW(st->layer, st->nlayer, st->layercap, st->nlayer + 1, oom);
            LayerRow *r = &st->layer[st->nlayer++];
            memset(r, 0, sizeof(*r));
            r->cat = cat;
            r->first_ts = ts;
            r->last_end = end;
        }
        LayerRow *r = &st->layer[slot - 1];
        r->count++;
        if (sum_add(&r->time, dur)) FAILWITH(FAIL_OVERFLOW);
        if (ts < r->first_ts) r->first_ts = ts;
        if (end > r->last_end) r->last_end = end;
        if ((cflags & CP_CKPT) || (!is_io && (np->flags & NP_CKPT))) r->ckpt++;
    }
    if (cat && !is_io && !dft) { /* application events by name */
        int added;
        uint32_t slot = map_get_c(&st->name_map, &st->c_names[name & 7], cat, name, &added);
        if (!slot) FAILWITH(FAIL_OOM);
        if (added) {
            GROW(st->names, st->nnames, st->namecap, st->nnames + 1, oom);
            NameRow *r = &st->names[st->nnames++];
            memset(r, 0, sizeof(*r));
            r->cat = cat;
            r->name = name;
        }
        NameRow *r = &st->names[slot - 1];
        r->count++;
        if (sum_add(&r->time, dur)) FAILWITH(FAIL_OVERFLOW);
    }
    if (ev->at[T_EPOCH].set) {
        uint32_t ep = intern_str(st, &ev->at[T_EPOCH]);
        uint32_t sp = ev->at[T_STEP].set ? intern_str(st, &ev->at[T_STEP]) : 0;
        if (!ep || (ev->at[T_STEP].set && !sp)) FAILWITH(FAIL_OOM);
        int added;
        uint32_t slot = map_get_c(&st->epoch_map, &st->c_epoch, pi, ep, &added);
        if (!slot) FAILWITH(FAIL_OOM);
        if (added) {
            GROW(st->epochs, st->nepochs, st->epochcap, st->nepochs + 1, oom);
            EpochRow *r = &st->epochs[st->nepochs++];
            r->proc = pi;
            r->epoch = ep;
            r->host_inline = host_inline;
            r->first_ts = ts;
            r->last_end = end;
        }
        EpochRow *r = &st->epochs[slot - 1];
        r->host_inline |= host_inline;
        if (ts < r->first_ts) r->first_ts = ts;
        if (end > r->last_end) r->last_end = end;
        if (!map_get_c(&st->steps, &st->c_steps, ep, sp, &added)) FAILWITH(FAIL_OOM);
    }
    if (cat && !is_io && ((np->flags & NP_COMPUTE) || (cflags & CP_COMPUTE))) {
        GROW(st->cspan, st->ncs, st->ncscap, st->ncs + 1, oom);
        st->cspan[st->ncs++] = (Span){ts, end, pi};
    }
    if (!is_io) return 1;

    /* ---- I/O call ---- */
    int fam = np->fam;
    const Str *fs = ev->at[T_FNAME].set ? &ev->at[T_FNAME] : &ev->at[T_FHASH];
    uint8_t is_path = ev->at[T_FNAME].set;
    uint32_t fkey = fs->set ? intern_str(st, fs) : 0;
    if (fs->set && !fkey) FAILWITH(FAIL_OOM);
    const I64 *ret = &ev->ai[A_RET];
    I64 nbytes = {0, 0};
    if (ret->set) {
        nbytes.set = 1;
        if (ret->v <= 0) {
            nbytes.v = 0;
        } else if (np->item) {
            if (!ev->ai[A_SIZE].set) nbytes.set = 0;
            else if (__builtin_mul_overflow(ret->v, ev->ai[A_SIZE].v, &nbytes.v)) FAILWITH(FAIL_OVERFLOW);
        } else {
            nbytes.v = ret->v;
        }
    }
    /* b_fam, per DuckDB batch */
    FamRow *fr = fam_row(st, fam);
    if (!fr) FAILWITH(FAIL_OOM);
    fr->count++;
    if (sum_add(&fr->time, dur)) FAILWITH(FAIL_OVERFLOW);
    if (!ev->has_args) fr->no_args++;
    if (nbytes.set) {
        fr->sized++;
        if (sum_add(&fr->bytes, nbytes.v)) FAILWITH(FAIL_OVERFLOW);
        if (nbytes.v < c->small) {
            fr->small++;
            if (sum_add(&fr->small_time, dur)) FAILWITH(FAIL_OVERFLOW);
        }
        if (dur > 0) {
            fr->bw_sum += (double)nbytes.v / (double)dur;
            fr->bw_n++;
        }
        if (fam == FAM_READ || fam == FAM_WRITE) {
            int b = size_bin(c, nbytes.v);
            st->hist_count[fam][b]++;
            if (sum_add(&st->hist_bytes[fam][b], nbytes.v)) FAILWITH(FAIL_OVERFLOW);
        }
    }
    { /* interface */
        int added;
        uint32_t slot = map_get_c(&st->iface_map, &st->c_iface[fam], ucat, (uint64_t)fam, &added);
        if (!slot) FAILWITH(FAIL_OOM);
        if (added) {
            GROW(st->iface, st->niface, st->ifacecap, st->niface + 1, oom);
            IfaceRow *r = &st->iface[st->niface++];
            memset(r, 0, sizeof(*r));
            r->ucat = ucat;
            r->fam = fam;
        }
        IfaceRow *r = &st->iface[slot - 1];
        r->count++;
        if (nbytes.set && sum_add(&r->bytes, nbytes.v)) FAILWITH(FAIL_OVERFLOW);
        if (sum_add(&r->time, dur)) FAILWITH(FAIL_OVERFLOW);
    }
    pr = &st->proc[pi];
    pr->io++;
    if (!famcols_add(&pr->f, fam, &nbytes, dur)) FAILWITH(FAIL_OVERFLOW);
    if (fkey) {
        int added;
        uint32_t slot = map_get_c(&st->path_map, &st->c_path, fkey, 0, &added);
        if (!slot) FAILWITH(FAIL_OOM);
        if (added) {
            GROW(st->path, st->npath, st->pathcap, st->npath + 1, oom);
            PathRow *r = &st->path[st->npath++];
            memset(r, 0, sizeof(*r));
            r->fkey = fkey;
            r->is_path = is_path;
        }
        PathRow *r = &st->path[slot - 1];
        if (r->is_path != is_path) FAILWITH("one string is both a file name and a file hash");
        if (st->file_view) {
            if (!famcols_add(&r->f, fam, &nbytes, dur)) FAILWITH(FAIL_OVERFLOW);
            if (r->last_proc != pi + 1) {
                if (!map_get(&st->pathproc, fkey, pi, &added)) FAILWITH(FAIL_OOM);
                r->last_proc = pi + 1;
            }
        }
    }
    if (st->time_on) {
        int64_t bin = ts >> st->t_shift; /* arithmetic shift: floor, as DuckDB's >> */
        if (!st->t_any) {
            st->t_lo = st->t_hi = bin;
            st->t_any = 1;
        } else {
            int64_t lo = bin < st->t_lo ? bin : st->t_lo, hi = bin > st->t_hi ? bin : st->t_hi;
            while ((uint64_t)hi - (uint64_t)lo >= (uint64_t)st->t_cap) {
                if (!time_coarsen(st)) FAILWITH(FAIL_OVERFLOW);
                lo >>= 1;
                hi >>= 1;
                bin >>= 1;
            }
            st->t_lo = lo;
            st->t_hi = hi;
        }
        size_t i = (size_t)((uint64_t)bin & (uint64_t)(st->t_cap - 1)) * NFAM + (size_t)fam;
        st->time_count[i]++;
        if (nbytes.set && sum_add(&st->time_bytes[i], nbytes.v)) FAILWITH(FAIL_OVERFLOW);
        if (sum_add(&st->time_time[i], dur)) FAILWITH(FAIL_OVERFLOW);
    }
    GROW(st->iospan, st->nio, st->niocap, st->nio + 1, oom);
    st->iospan[st->nio++] = (Span){ts, end, pi};

    int kind = fkey ? np->role : ROLE_OTHER;
    if (kind != ROLE_OTHER) {
        int64_t setpos = UNKNOWN;
        const I64 *off = &ev->ai[A_OFFSET], *wh = &ev->ai[A_WHENCE], *fl = &ev->ai[A_FLAGS];
        switch (np->setter) {
        case SET_OPEN:
            setpos = ((fl->set && (fl->v & c->o_append) != 0) || mode_is_append(st, &ev->at[T_MODE])) ? UNKNOWN : 0;
            break;
        case SET_LSEEK:
            if (ret->set && ret->v >= 0) setpos = ret->v;
            else if (wh->set && wh->v == c->seek_set) setpos = off->set ? off->v : UNKNOWN;
            break;
        case SET_FSEEK:
            if (wh->set && wh->v == c->seek_set && ret->set && ret->v == 0) setpos = off->set ? off->v : UNKNOWN;
            break;
        case SET_REWIND: setpos = 0; break;
        default: break;
        }
        int added;
        uint32_t g = map_get_c(&st->gfile_map, &st->c_gfile, pi, fkey, &added);
        if (!g) FAILWITH(FAIL_OOM);
        if (added) {
            GROW(st->gfk, st->ngfk, st->gfkcap, st->ngfk + 1, oom);
            st->gfk[st->ngfk++] = fkey;
        }
        GROW(st->pos, st->npos, st->poscap, st->npos + 1, oom);
        PosRec *r = &st->pos[st->npos++];
        r->ts = ts;
        r->nb = nbytes.set ? nbytes.v : -1;
        r->pos = kind == ROLE_POSITIONAL ? (off->set ? off->v : -1) : setpos;
        r->dur = dur;
        r->g = g - 1;
        r->kind = (int8_t)kind;
        r->is_write = fam == FAM_WRITE;
    }
    return 1;
oom:
    FAILWITH(FAIL_OOM);
}

/* ------------------------------------------------------------------------------ */
/* order-dependent passes                                                          */

/* The records' fields are read in place (base + i * stride + offset) rather than copied
   out: at 2.5M I/O calls per file a copy of the group ids and times is another 30 MB. */
#define U32_AT(base, stride, off, i) (*(const uint32_t *)((const char *)(base) + (size_t)(i) * (stride) + (off)))
#define I64_AT(base, stride, off, i) (*(const int64_t *)((const char *)(base) + (size_t)(i) * (stride) + (off)))

/* Stable counting sort of record indices by their group id (0..ngroups-1). */
static uint32_t *group_order(const void *rec, size_t stride, size_t goff, size_t n, size_t ngroups,
                             size_t **starts_out) {
    size_t *start = calloc(ngroups + 1, sizeof(size_t));
    uint32_t *order = malloc((n ? n : 1) * sizeof(uint32_t));
    if (!start || !order) {
        free(start);
        free(order);
        return NULL;
    }
    for (size_t i = 0; i < n; i++) start[U32_AT(rec, stride, goff, i) + 1]++;
    for (size_t g = 0; g < ngroups; g++) start[g + 1] += start[g];
    size_t *fill = malloc((ngroups + 1) * sizeof(size_t));
    if (!fill) {
        free(start);
        free(order);
        return NULL;
    }
    memcpy(fill, start, (ngroups + 1) * sizeof(size_t));
    for (size_t i = 0; i < n; i++) order[fill[U32_AT(rec, stride, goff, i)]++] = (uint32_t)i;
    free(fill);
    *starts_out = start;
    return order;
}

/* Sort idx[0:n] stably by the records' int64 key, unless already in order.  *tmp is
   allocated on first use (most groups are in time order).  0 on OOM. */
static int sort_group(uint32_t *idx, size_t n, const void *rec, size_t stride, size_t koff, uint32_t **tmp,
                      size_t tmp_n) {
    int sorted = 1;
    for (size_t i = 1; i < n; i++)
        if (I64_AT(rec, stride, koff, idx[i]) < I64_AT(rec, stride, koff, idx[i - 1])) {
            sorted = 0;
            break;
        }
    if (sorted) return 1;
    if (!*tmp && !(*tmp = malloc(tmp_n * sizeof(uint32_t)))) return 0;
    uint32_t *tp = *tmp;
    for (size_t w = 1; w < n; w *= 2) {
        for (size_t lo = 0; lo < n; lo += 2 * w) {
            size_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n;
            size_t i = lo, j = mid, o = lo;
            while (i < mid && j < hi) {
                int64_t a = I64_AT(rec, stride, koff, idx[i]), b = I64_AT(rec, stride, koff, idx[j]);
                tp[o++] = b < a ? idx[j++] : idx[i++];
            }
            while (i < mid) tp[o++] = idx[i++];
            while (j < hi) tp[o++] = idx[j++];
        }
        memcpy(idx, tp, n * sizeof(uint32_t));
    }
    return 1;
}

typedef struct {
    Map map; /* (fk, is_write) -> slot */
    AccRow *rows;
    uint32_t *fk;
    uint8_t *w;
    size_t n, cap;
} AccTab;

static int classify(St *st, AccTab *acc) {
    size_t n = st->npos, ng = st->gfile_map.n;
    if (!map_init(&acc->map, 64)) return 0;
    if (n == 0) return 1;
    uint32_t *tmp = NULL;
    size_t *start = NULL;
    uint32_t *order = group_order(st->pos, sizeof(PosRec), offsetof(PosRec, g), n, ng, &start);
    int res = 0;
    if (!order) goto done;
    for (size_t g = 0; g < ng; g++) {
        size_t lo = start[g], hi = start[g + 1];
        if (!sort_group(order + lo, hi - lo, st->pos, sizeof(PosRec), offsetof(PosRec, ts), &tmp, n)) goto done;
        uint32_t fk = st->gfk[g];
        int64_t base = UNKNOWN, adv = 0, lost = 0, prev_end = UNKNOWN;
        for (size_t i = lo; i < hi; i++) {
            const PosRec *r = &st->pos[order[i]];
            if (r->kind == ROLE_SETTER) {
                base = r->pos;
                adv = 0;
                lost = 0;
                continue;
            }
            int64_t s;
            if (r->kind == ROLE_POSITIONAL) {
                s = r->pos;
            } else {
                if (base >= 0 && lost == 0) {
                    if (__builtin_add_overflow(base, adv, &s)) {
                        st->why = FAIL_OVERFLOW;
                        goto done;
                    }
                } else {
                    s = UNKNOWN;
                }
                if (r->nb > 0) {
                    if (__builtin_add_overflow(adv, r->nb, &adv)) {
                        st->why = FAIL_OVERFLOW;
                        goto done;
                    }
                } else if (r->nb < 0) {
                    lost++;
                }
            }
            if (s < 0) s = UNKNOWN;
            int64_t e = UNKNOWN;
            if (s >= 0 && r->nb >= 0 && __builtin_add_overflow(s, r->nb, &e)) {
                st->why = FAIL_OVERFLOW;
                goto done;
            }
            int64_t pe = prev_end; /* end of the previous access of this (process, file) */
            int valid = s >= 0 && pe >= 0;
            prev_end = e;
            if (s < 0) continue;
            int added;
            uint32_t slot = map_get(&acc->map, fk, r->is_write, &added);
            if (!slot) goto done;
            if (added) {
                if (acc->n + 1 > acc->cap) {
                    size_t nc = acc->cap ? acc->cap * 2 : 64;
                    AccRow *ar = realloc(acc->rows, nc * sizeof(AccRow));
                    if (!ar) goto done;
                    acc->rows = ar;
                    uint32_t *af = realloc(acc->fk, nc * sizeof(uint32_t));
                    if (!af) goto done;
                    acc->fk = af;
                    uint8_t *aw = realloc(acc->w, nc);
                    if (!aw) goto done;
                    acc->w = aw;
                    acc->cap = nc;
                }
                memset(&acc->rows[acc->n], 0, sizeof(AccRow));
                acc->fk[acc->n] = fk;
                acc->w[acc->n] = r->is_write;
                acc->n++;
            }
            AccRow *a = &acc->rows[slot - 1];
            a->positioned++;
            if (valid) {
                if (s == pe) a->consecutive++;
                if (s >= pe) {
                    a->sequential++;
                } else {
                    a->random++;
                    if (sum_add(&a->random_time, r->dur)) {
                        st->why = FAIL_OVERFLOW;
                        goto done;
                    }
                }
            }
            if (s % st->cfg->align != 0) {
                a->misaligned++;
                if (sum_add(&a->misaligned_time, r->dur)) {
                    st->why = FAIL_OVERFLOW;
                    goto done;
                }
            }
        }
    }
    res = 1;
done:
    free(tmp);
    free(start);
    free(order);
    return res;
}

/* Disjoint islands of the union of intervals, per group: island i of group g is
   [is[i], ie[i]) for gstart[g] <= i < gstart[g+1].  Touching intervals merge. */
static int islands(const Span *sp, size_t n, size_t ng, int64_t **is_out, int64_t **ie_out, size_t **gs_out) {
    uint32_t *tmp = NULL;
    int64_t *is = malloc((n ? n : 1) * sizeof(int64_t)); /* pages are touched per island only */
    int64_t *ie = malloc((n ? n : 1) * sizeof(int64_t));
    size_t *gs = calloc(ng + 1, sizeof(size_t));
    size_t *start = NULL;
    uint32_t *order = NULL;
    if (!is || !ie || !gs) goto fail;
    order = group_order(sp, sizeof(Span), offsetof(Span, g), n, ng, &start);
    if (!order) goto fail;
    size_t k = 0;
    for (size_t g = 0; g < ng; g++) {
        size_t lo = start[g], hi = start[g + 1];
        gs[g] = k;
        if (!sort_group(order + lo, hi - lo, sp, sizeof(Span), offsetof(Span, s), &tmp, n)) goto fail;
        for (size_t i = lo; i < hi; i++) {
            const Span *x = &sp[order[i]];
            if (i == lo || x->s > ie[k - 1]) {
                is[k] = x->s;
                ie[k] = x->e;
                k++;
            } else if (x->e > ie[k - 1]) {
                ie[k - 1] = x->e;
            }
        }
    }
    gs[ng] = k;
    free(tmp);
    free(start);
    free(order);
    *is_out = is;
    *ie_out = ie;
    *gs_out = gs;
    return 1;
fail:
    free(tmp);
    free(is);
    free(ie);
    free(gs);
    free(start);
    free(order);
    return 0;
}

typedef struct {
    int64_t io_wall, overlap, c_wall;
    uint8_t any;
} Ovl;

static int overlap_pass(St *st, Ovl *out) {
    size_t ng = st->nproc;
    int64_t *ais = NULL, *aie = NULL, *cis = NULL, *cie = NULL;
    size_t *ags = NULL, *cgs = NULL;
    int res = 0;
    if (!islands(st->iospan, st->nio, ng, &ais, &aie, &ags)) goto done;
    if (!islands(st->cspan, st->ncs, ng, &cis, &cie, &cgs)) goto done;
    for (size_t g = 0; g < ng; g++) {
        Ovl *o = &out[g];
        memset(o, 0, sizeof(*o));
        size_t a0 = ags[g], a1 = ags[g + 1], b0 = cgs[g], b1 = cgs[g + 1];
        o->any = (a1 > a0) || (b1 > b0);
        for (size_t i = a0; i < a1; i++)
            if (add_ovf(&o->io_wall, aie[i] - ais[i])) goto ovf;
        for (size_t i = b0; i < b1; i++)
            if (add_ovf(&o->c_wall, cie[i] - cis[i])) goto ovf;
        size_t i = a0, j = b0;
        while (i < a1 && j < b1) {
            int64_t lo = ais[i] > cis[j] ? ais[i] : cis[j];
            int64_t hi = aie[i] < cie[j] ? aie[i] : cie[j];
            if (hi > lo && add_ovf(&o->overlap, hi - lo)) goto ovf;
            if (aie[i] < cie[j]) i++;
            else j++;
        }
    }
    res = 1;
    goto done;
ovf:
    st->why = FAIL_OVERFLOW;
done:
    free(ais);
    free(aie);
    free(cis);
    free(cie);
    free(ags);
    free(cgs);
    return res;
}

/* ------------------------------------------------------------------------------ */
/* reading lines from plain or gzip (single- or multi-member) files                */

static int ensure_scratch(St *st, size_t need) {
    if (need <= st->scratch_cap) return 1;
    size_t nc = st->scratch_cap ? st->scratch_cap : 1 << 16;
    while (nc < need) nc *= 2;
    char *b = realloc(st->scratch, 2 * nc);
    if (!b) return 0;
    st->scratch = b;
    st->scratch_cap = nc;
    return 1;
}

static int handle_line(St *st, const char *p, const char *e) {
    if (e > p && e[-1] == '\r') e--;
    const char *a = skip_ws(p, e), *b = e;
    while (b > a && (b[-1] == ' ' || b[-1] == '\t')) b--;
    if (a == b) return 1; /* blank: DuckDB makes no row of it */
    size_t n = (size_t)(b - a);
    if ((n == 1 && (a[0] == '[' || a[0] == ']')) || (n == 2 && (a[0] == '[' || a[0] == ']') && a[1] == ',')) {
        st->row_idx++; /* legacy JSON-array punctuation: a NULL row for DuckDB, no event */
        return 1;
    }
    if (!ensure_scratch(st, (size_t)(e - p) + 16)) FAILWITH(FAIL_OOM);
    Ev ev;
    if (!parse_line(p, e, &ev, st->scratch, &st->preds)) FAILWITH(FAIL_JSON);
    if (!process_event(st, &ev)) return 0;
    st->row_idx++;
    return 1;
}

/* Split buf[0:len] into lines; returns bytes consumed (complete lines), or -1 on failure. */
static ptrdiff_t handle_lines(St *st, const char *buf, size_t len) {
    const char *p = buf, *e = buf + len;
    for (;;) {
        const char *nl = memchr(p, '\n', (size_t)(e - p));
        if (!nl) {
            if ((size_t)(e - p) > st->cfg->max_line) {
                st->why = "a line longer than the line-length limit";
                return -1;
            }
            break;
        }
        if ((size_t)(nl - p) > st->cfg->max_line) {
            st->why = "a line longer than the line-length limit";
            return -1;
        }
        if (!handle_line(st, p, nl)) return -1;
        p = nl + 1;
    }
    return p - buf;
}

#define IN_CHUNK (1 << 18)
#ifndef BUF_START
#define BUF_START (1 << 22)
#endif
#define BUF_PAD 64                     /* zeroed bytes after the line buffer for wide loads */

/* gzip inflate, one member at a time: ISA-L's igzip when the build found it (about 3x
   zlib's speed on trace data, streaming, CRC and length checked), else zlib. */
#ifdef DFT_HAVE_ISAL
#define INFLATE_NAME "isa-l"
typedef struct {
    struct inflate_state s;
} Infl;

static int infl_init(Infl *z) {
    isal_inflate_init(&z->s);
    z->s.crc_flag = ISAL_GZIP;
    return 1;
}

static int infl_reset(Infl *z) {
    isal_inflate_reset(&z->s);
    z->s.crc_flag = ISAL_GZIP;
    return 1;
}

static void infl_end(Infl *z) { (void)z; }

/* Inflate from *in into out[0:n_out]: 1 = member finished (trailer checked), 0 = more
   input or output space needed, -1 = corrupt.  *in / *n_in advance; *wrote is set. */
static int infl_step(Infl *z, const unsigned char **in, size_t *n_in, char *out, size_t n_out, size_t *wrote) {
    z->s.next_in = (uint8_t *)*in;
    z->s.avail_in = (uint32_t)*n_in;
    z->s.next_out = (uint8_t *)out;
    z->s.avail_out = (uint32_t)n_out;
    int r = isal_inflate(&z->s);
    *in = z->s.next_in;
    *n_in = z->s.avail_in;
    *wrote = n_out - z->s.avail_out;
    if (r < 0 || r == ISAL_NEED_DICT) return -1;
    return z->s.block_state == ISAL_BLOCK_FINISH;
}
#else
#define INFLATE_NAME "zlib"
typedef struct {
    z_stream s;
} Infl;

static int infl_init(Infl *z) {
    memset(&z->s, 0, sizeof(z->s));
    return inflateInit2(&z->s, 15 + 16) == Z_OK;
}

static int infl_reset(Infl *z) { return inflateReset(&z->s) == Z_OK; }

static void infl_end(Infl *z) { inflateEnd(&z->s); }

static int infl_step(Infl *z, const unsigned char **in, size_t *n_in, char *out, size_t n_out, size_t *wrote) {
    z->s.next_in = (Bytef *)*in;
    z->s.avail_in = (uInt)*n_in;
    z->s.next_out = (Bytef *)out;
    z->s.avail_out = (uInt)n_out;
    int r = inflate(&z->s, Z_NO_FLUSH);
    *in = z->s.next_in;
    *n_in = z->s.avail_in;
    *wrote = n_out - z->s.avail_out;
    if (r == Z_STREAM_END) return 1;
    return (r == Z_OK || r == Z_BUF_ERROR) ? 0 : -1;
}
#endif

static int run_file(St *st, const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) FAILWITH("cannot open the file");
    unsigned char *in = malloc(IN_CHUNK);
    size_t cap = BUF_START, len = 0;
    char *buf = malloc(cap + BUF_PAD);
    Infl *z = NULL;
    int ok = 0, gz = 0, eof = 0;
    const unsigned char *next_in = in;
    size_t avail_in = 0;
    if (!in || !buf) {
        st->why = FAIL_OOM;
        goto out;
    }
    memset(buf + cap, 0, BUF_PAD);
    st->buf_lo = buf;
    st->buf_hi = buf + cap + BUF_PAD;
    size_t in_len = fread(in, 1, IN_CHUNK, f);
    if (in_len < IN_CHUNK) {
        if (ferror(f)) {
            st->why = "read error";
            goto out;
        }
        eof = 1;
    }
    gz = in_len >= 2 && in[0] == 0x1f && in[1] == 0x8b;
    if (gz) {
        z = malloc(sizeof(Infl));
        if (!z || !infl_init(z)) {
            free(z);
            z = NULL;
            st->why = FAIL_OOM;
            goto out;
        }
        avail_in = in_len;
    } else {
        memcpy(buf, in, in_len);
        len = in_len;
    }
    int input_done = 0;
    for (;;) {
        /* process complete lines */
        ptrdiff_t used = handle_lines(st, buf, len);
        if (used < 0) goto out;
        memmove(buf, buf + used, len - (size_t)used);
        len -= (size_t)used;
        if (input_done) break;
        if (len == cap) {
            if (cap >= st->cfg->max_line) {
                st->why = "a line longer than the line-length limit";
                goto out;
            }
            char *nb = realloc(buf, cap * 2 + BUF_PAD);
            if (!nb) {
                st->why = FAIL_OOM;
                goto out;
            }
            buf = nb;
            cap *= 2;
            memset(buf + cap, 0, BUF_PAD);
            st->buf_lo = buf;
            st->buf_hi = buf + cap + BUF_PAD;
        }
        if (!gz) {
            size_t got = fread(buf + len, 1, cap - len, f);
            if (got == 0) {
                if (ferror(f)) {
                    st->why = "read error";
                    goto out;
                }
                input_done = 1;
            }
            len += got;
            continue;
        }
        if (avail_in == 0 && !eof) {
            size_t got = fread(in, 1, IN_CHUNK, f);
            if (got < IN_CHUNK) {
                if (ferror(f)) {
                    st->why = "read error";
                    goto out;
                }
                eof = 1;
            }
            next_in = in;
            avail_in = got;
        }
        size_t room = cap - len, wrote;
        int zr = infl_step(z, &next_in, &avail_in, buf + len, room, &wrote);
        len += wrote;
        if (zr < 0) {
            st->why = "corrupt gzip stream";
            goto out;
        }
        if (zr == 1) {
            /* another gzip member may follow */
            if (avail_in < 2 && !eof) {
                memmove(in, next_in, avail_in);
                size_t got = fread(in + avail_in, 1, IN_CHUNK - avail_in, f);
                if (got < IN_CHUNK - avail_in) {
                    if (ferror(f)) {
                        st->why = "read error";
                        goto out;
                    }
                    eof = 1;
                }
                next_in = in;
                avail_in += got;
            }
            if (avail_in == 0 && eof) {
                input_done = 1;
            } else if (avail_in >= 2 && next_in[0] == 0x1f && next_in[1] == 0x8b) {
                if (!infl_reset(z)) {
                    st->why = "corrupt gzip stream";
                    goto out;
                }
            } else {
                st->why = "data after the last gzip member";
                goto out;
            }
        } else if (avail_in == 0 && eof && wrote < room) {
            st->why = "truncated gzip stream"; /* all input used, output not full, no member end */
            goto out;
        }
    }
    if (len > 0 && !handle_line(st, buf, buf + len)) goto out; /* last line without newline */
    ok = 1;
out:
    if (z) {
        infl_end(z);
        free(z);
    }
    free(in);
    free(buf);
    fclose(f);
    return ok;
}

/* ------------------------------------------------------------------------------ */
/* results as Python objects: {table: {column: list}}                              */

/* A result column: n int64 (or float64) values and a validity byte per value; handed to
   Python as two bytes objects so no Python object is made per value. */
typedef struct {
    char name[32];
    int64_t *v;
    uint8_t *ok;
} Col;

typedef struct {
    PyObject *dict;
    Py_ssize_t n;
    int err;
    Col cols[24];
    int ncols;
} Tab;

typedef struct {
    int64_t v;
    uint8_t null;
} Cell;

static int tab_init(Tab *t, PyObject *parent, const char *name, Py_ssize_t n) {
    t->dict = PyDict_New();
    t->n = n;
    t->err = 0;
    t->ncols = 0;
    if (!t->dict) return 0;
    int r = PyDict_SetItemString(parent, name, t->dict);
    Py_DECREF(t->dict); /* parent holds it */
    return r == 0;
}

static Col *tab_col(Tab *t, const char *name) {
    if (t->err || t->ncols >= 24) {
        t->err = 1;
        return NULL;
    }
    Col *c = &t->cols[t->ncols++];
    snprintf(c->name, sizeof(c->name), "%s", name);
    c->v = calloc(t->n ? (size_t)t->n : 1, sizeof(int64_t));
    c->ok = calloc(t->n ? (size_t)t->n : 1, 1);
    if (!c->v || !c->ok) t->err = 1;
    return c;
}

static inline void put(Tab *t, Col *c, Py_ssize_t i, Cell x) {
    if (!c || !c->v || !c->ok) {
        t->err = 1;
        return;
    }
    c->v[i] = x.v;
    c->ok[i] = !x.null;
}

/* Hand the columns to Python as {name: (values bytes, validity bytes)} and free them. */
static int tab_done(Tab *t) {
    int ok = !t->err;
    for (int j = 0; j < t->ncols; j++) {
        Col *c = &t->cols[j];
        if (ok) {
            PyObject *v = PyBytes_FromStringAndSize((const char *)c->v, t->n * (Py_ssize_t)sizeof(int64_t));
            PyObject *m = PyBytes_FromStringAndSize((const char *)c->ok, t->n);
            PyObject *pair = (v && m) ? PyTuple_Pack(2, v, m) : NULL;
            if (!pair || PyDict_SetItemString(t->dict, c->name, pair) < 0) ok = 0;
            Py_XDECREF(v);
            Py_XDECREF(m);
            Py_XDECREF(pair);
        }
        free(c->v);
        free(c->ok);
    }
    t->ncols = 0;
    return ok;
}

static Cell i64(int64_t v) { return (Cell){v, 0}; }
static Cell opt(int64_t v, int present) { return (Cell){present ? v : 0, (uint8_t)!present}; }
static Cell sumv(const Sum *s) { return (Cell){s->n ? s->v : 0, (uint8_t)(s->n == 0)}; }
static Cell boolv(int b) { return (Cell){b ? 1 : 0, 0}; }
static Cell f64(double d, int present) {
    Cell c = {0, (uint8_t)!present};
    memcpy(&c.v, &d, sizeof(double)); /* the bits; Python reads the column as float64 */
    return c;
}

static int famcols_out(Tab *t, Py_ssize_t i, const FamCols *f, Col **cols) {
    /* read_count, read_bytes, read_time_us, write_*, metadata_count, metadata_time_us, sync_* */
    put(t, cols[0], i, i64(f->count[FAM_READ]));
    put(t, cols[1], i, sumv(&f->bytes[FAM_READ]));
    put(t, cols[2], i, sumv(&f->time[FAM_READ]));
    put(t, cols[3], i, i64(f->count[FAM_WRITE]));
    put(t, cols[4], i, sumv(&f->bytes[FAM_WRITE]));
    put(t, cols[5], i, sumv(&f->time[FAM_WRITE]));
    put(t, cols[6], i, i64(f->count[FAM_META]));
    put(t, cols[7], i, sumv(&f->time[FAM_META]));
    put(t, cols[8], i, i64(f->count[FAM_SYNC]));
    put(t, cols[9], i, sumv(&f->time[FAM_SYNC]));
    return !t->err;
}

static const char *const FAMCOL_NAMES[10] = {
    "read_count", "read_bytes", "read_time_us", "write_count", "write_bytes", "write_time_us",
    "metadata_count", "metadata_time_us", "sync_count", "sync_time_us",
};

static void famcols_cols(Tab *t, Col **cols) {
    for (int j = 0; j < 10; j++) cols[j] = tab_col(t, FAMCOL_NAMES[j]);
}

static int set_int(PyObject *d, const char *k, int64_t v) {
    PyObject *o = PyLong_FromLongLong(v);
    if (!o) return 0;
    int r = PyDict_SetItemString(d, k, o);
    Py_DECREF(o);
    return r == 0;
}

static PyObject *build_result(St *st, AccTab *acc, Ovl *ovl) {
    PyObject *res = PyDict_New();
    if (!res) return NULL;
    Tab t;
    Py_ssize_t i;
    /* strings: every interned string, as Arrow large-string buffers (int64 offsets, bytes) */
    {
        size_t n = st->str.n;
        int64_t *offs = malloc((n + 1) * sizeof(int64_t));
        char *data = malloc(st->str.alen ? st->str.alen : 1);
        if (!offs || !data) {
            free(offs);
            free(data);
            PyErr_NoMemory();
            goto fail;
        }
        int64_t at = 0;
        for (size_t j = 0; j < n; j++) {
            offs[j] = at;
            memcpy(data + at, istr(&st->str, (uint32_t)j), st->str.len[j]);
            at += st->str.len[j];
        }
        offs[n] = at;
        PyObject *o = PyBytes_FromStringAndSize((const char *)offs, (Py_ssize_t)((n + 1) * sizeof(int64_t)));
        PyObject *d = PyBytes_FromStringAndSize(data, (Py_ssize_t)at);
        free(offs);
        free(data);
        PyObject *pair = (o && d) ? PyTuple_Pack(2, o, d) : NULL;
        Py_XDECREF(o);
        Py_XDECREF(d);
        int r = pair ? PyDict_SetItemString(res, "strings", pair) : -1;
        Py_XDECREF(pair);
        if (r < 0) goto fail;
    }
    /* counts */
    {
        PyObject *c = PyDict_New();
        if (!c || PyDict_SetItemString(res, "counts", c) < 0) {
            Py_XDECREF(c);
            goto fail;
        }
        Py_DECREF(c);
        if (!set_int(c, "rows", st->rows) || !set_int(c, "events", st->events) ||
            !set_int(c, "metadata_lines", st->metadata_lines) || !set_int(c, "counter_events", st->counter_events) ||
            !set_int(c, "aggregated_events", st->aggregated_events) || !set_int(c, "legacy_rows", st->legacy_rows) ||
            !set_int(c, "v2_rows", st->v2_rows))
            goto fail;
        if (st->have_ts) {
            if (!set_int(c, "first_ts", st->first_ts) || !set_int(c, "last_end", st->last_end)) goto fail;
        }
        if (st->t_any && !set_int(c, "time_shift", st->t_shift)) goto fail;
    }
    /* fam: one row per (DuckDB batch, family) */
    {
        Py_ssize_t n = 0;
        for (size_t j = 0; j < st->nfamrows; j++) n += st->famrow_used[j];
        if (!tab_init(&t, res, "fam", n)) goto fail;
        Col *cf = tab_col(&t, "fam"), *cc = tab_col(&t, "count"), *cb = tab_col(&t, "bytes"),
                 *cs = tab_col(&t, "sized"), *ct = tab_col(&t, "time_us"), *csm = tab_col(&t, "small"),
                 *cst = tab_col(&t, "small_time_us"), *cbw = tab_col(&t, "bw_sum"), *cbn = tab_col(&t, "bw_n"),
                 *cna = tab_col(&t, "no_args");
        i = 0;
        for (size_t j = 0; j < st->nfamrows; j++) {
            if (!st->famrow_used[j]) continue;
            const FamRow *r = &st->famrows[j];
            put(&t, cf, i, i64((int64_t)(j % NFAM)));
            put(&t, cc, i, i64(r->count));
            put(&t, cb, i, sumv(&r->bytes));
            put(&t, cs, i, i64(r->sized));
            put(&t, ct, i, sumv(&r->time));
            put(&t, csm, i, i64(r->small));
            put(&t, cst, i, sumv(&r->small_time));
            put(&t, cbw, i, f64(r->bw_sum, r->bw_n > 0));
            put(&t, cbn, i, i64(r->bw_n));
            put(&t, cna, i, i64(r->no_args));
            i++;
        }
        if (!tab_done(&t)) goto fail;
    }
    /* agg */
    {
        Py_ssize_t n = 0;
        for (int f = 0; f < NFAM; f++) n += st->agg_used[f];
        if (!tab_init(&t, res, "agg", n)) goto fail;
        Col *cf = tab_col(&t, "fam"), *cr = tab_col(&t, "records"), *cc = tab_col(&t, "count"),
                 *cb = tab_col(&t, "bytes"), *ct = tab_col(&t, "time_us");
        i = 0;
        for (int f = 0; f < NFAM; f++) {
            if (!st->agg_used[f]) continue;
            put(&t, cf, i, i64(f));
            put(&t, cr, i, i64(st->agg[f].records));
            put(&t, cc, i, sumv(&st->agg[f].count));
            put(&t, cb, i, sumv(&st->agg[f].bytes));
            put(&t, ct, i, sumv(&st->agg[f].time));
            i++;
        }
        if (!tab_done(&t)) goto fail;
    }
    /* hist */
    {
        Py_ssize_t n = 0;
        for (int f = 0; f < 2; f++)
            for (int b = 0; b < st->cfg->nbins; b++) n += st->hist_count[f][b] > 0;
        if (!tab_init(&t, res, "hist", n)) goto fail;
        Col *cf = tab_col(&t, "fam"), *cs = tab_col(&t, "sbin"), *cc = tab_col(&t, "count"),
                 *cb = tab_col(&t, "bytes");
        i = 0;
        for (int f = 0; f < 2; f++)
            for (int b = 0; b < st->cfg->nbins; b++) {
                if (!st->hist_count[f][b]) continue;
                put(&t, cf, i, i64(f));
                put(&t, cs, i, i64(b));
                put(&t, cc, i, i64(st->hist_count[f][b]));
                put(&t, cb, i, sumv(&st->hist_bytes[f][b]));
                i++;
            }
        if (!tab_done(&t)) goto fail;
    }
    /* distinct accessed files; with the file view, each file's final row: its I/O, its name from
       this file's FH metadata, the processes that touched it and its access-pattern counts (what
       batch.py's finishing SQL joins together for the DuckDB path) */
    {
        if (!tab_init(&t, res, "path", (Py_ssize_t)st->npath)) goto fail;
        Col *ck = tab_col(&t, "fkey"), *cp = tab_col(&t, "is_path");
        Col *fc[10], *cn = NULL, *cq = NULL, *c1 = NULL, *c2 = NULL, *c3 = NULL;
        int64_t *per = NULL; /* [npath * 4]: processes, consecutive, sequential, random */
        if (st->file_view) {
            famcols_cols(&t, fc);
            cn = tab_col(&t, "name");
            cq = tab_col(&t, "processes");
            c1 = tab_col(&t, "consecutive");
            c2 = tab_col(&t, "sequential");
            c3 = tab_col(&t, "random");
            per = calloc(st->npath ? st->npath * 4 : 1, sizeof(int64_t));
            if (!per) {
                PyErr_NoMemory();
                goto fail;
            }
            const Map *pp = &st->pathproc; /* distinct (file key, process) pairs */
            for (size_t j = 0; j <= pp->mask; j++) {
                uint32_t slot = pp->v[j] ? map_find(&st->path_map, pp->a[j], 0) : 0;
                if (slot) per[(slot - 1) * 4]++;
            }
            for (size_t j = 0; j < acc->n; j++) {
                uint32_t slot = map_find(&st->path_map, acc->fk[j], 0);
                if (!slot) continue;
                per[(slot - 1) * 4 + 1] += acc->rows[j].consecutive;
                per[(slot - 1) * 4 + 2] += acc->rows[j].sequential;
                per[(slot - 1) * 4 + 3] += acc->rows[j].random;
            }
        }
        for (size_t j = 0; j < st->npath; j++) {
            const PathRow *r = &st->path[j];
            put(&t, ck, (Py_ssize_t)j, i64(r->fkey));
            put(&t, cp, (Py_ssize_t)j, boolv(r->is_path));
            if (!st->file_view) continue;
            famcols_out(&t, (Py_ssize_t)j, &r->f, fc);
            uint32_t fh = r->is_path ? 0 : map_find(&st->meta_map, 1 /* FH */, r->fkey);
            put(&t, cn, (Py_ssize_t)j, i64(fh ? st->meta[fh - 1].v : 0)); /* 0: NULL */
            put(&t, cq, (Py_ssize_t)j, i64(per[j * 4]));
            put(&t, c1, (Py_ssize_t)j, i64(per[j * 4 + 1]));
            put(&t, c2, (Py_ssize_t)j, i64(per[j * 4 + 2]));
            put(&t, c3, (Py_ssize_t)j, i64(per[j * 4 + 3]));
        }
        free(per);
        if (!tab_done(&t)) goto fail;
    }
    /* names */
    {
        if (!tab_init(&t, res, "names", (Py_ssize_t)st->nnames)) goto fail;
        Col *cc = tab_col(&t, "cat"), *cn = tab_col(&t, "name"), *ck = tab_col(&t, "count"),
                 *ct = tab_col(&t, "time_us");
        for (size_t j = 0; j < st->nnames; j++) {
            const NameRow *r = &st->names[j];
            put(&t, cc, (Py_ssize_t)j, i64(r->cat));
            put(&t, cn, (Py_ssize_t)j, i64(r->name));
            put(&t, ck, (Py_ssize_t)j, i64(r->count));
            put(&t, ct, (Py_ssize_t)j, sumv(&r->time));
        }
        if (!tab_done(&t)) goto fail;
    }
    /* iface */
    {
        if (!tab_init(&t, res, "iface", (Py_ssize_t)st->niface)) goto fail;
        Col *ci = tab_col(&t, "iface"), *cf = tab_col(&t, "fam"), *cc = tab_col(&t, "count"),
                 *cb = tab_col(&t, "bytes"), *ct = tab_col(&t, "time_us");
        for (size_t j = 0; j < st->niface; j++) {
            const IfaceRow *r = &st->iface[j];
            put(&t, ci, (Py_ssize_t)j, i64(r->ucat));
            put(&t, cf, (Py_ssize_t)j, i64(r->fam));
            put(&t, cc, (Py_ssize_t)j, i64(r->count));
            put(&t, cb, (Py_ssize_t)j, sumv(&r->bytes));
            put(&t, ct, (Py_ssize_t)j, sumv(&r->time));
        }
        if (!tab_done(&t)) goto fail;
    }
    /* layer */
    {
        if (!tab_init(&t, res, "layer", (Py_ssize_t)st->nlayer)) goto fail;
        Col *cc = tab_col(&t, "cat"), *ck = tab_col(&t, "count"), *ct = tab_col(&t, "time_us"),
                 *cf = tab_col(&t, "first_ts"), *cl = tab_col(&t, "last_end"),
                 *cp = tab_col(&t, "checkpoint_events");
        for (size_t j = 0; j < st->nlayer; j++) {
            const LayerRow *r = &st->layer[j];
            put(&t, cc, (Py_ssize_t)j, i64(r->cat));
            put(&t, ck, (Py_ssize_t)j, i64(r->count));
            put(&t, ct, (Py_ssize_t)j, sumv(&r->time));
            put(&t, cf, (Py_ssize_t)j, i64(r->first_ts));
            put(&t, cl, (Py_ssize_t)j, i64(r->last_end));
            put(&t, cp, (Py_ssize_t)j, i64(r->ckpt));
        }
        if (!tab_done(&t)) goto fail;
    }
    /* proctot (every process) and procfam (processes with I/O) */
    {
        if (!tab_init(&t, res, "proctot", (Py_ssize_t)st->nproc)) goto fail;
        Col *cg = tab_col(&t, "g"), *ch = tab_col(&t, "hkey"), *ci = tab_col(&t, "host_inline"),
                 *cp = tab_col(&t, "pid"), *ce = tab_col(&t, "events"), *cf = tab_col(&t, "first_ts"),
                 *cl = tab_col(&t, "last_end"), *cr = tab_col(&t, "rank"), *cc = tab_col(&t, "cmd_hash");
        for (size_t j = 0; j < st->nproc; j++) {
            const ProcRow *r = &st->proc[j];
            put(&t, cg, (Py_ssize_t)j, i64((int64_t)j));
            put(&t, ch, (Py_ssize_t)j, i64(r->hkey));
            put(&t, ci, (Py_ssize_t)j, boolv(r->host_inline));
            put(&t, cp, (Py_ssize_t)j, opt(r->pid, r->pid_set));
            put(&t, ce, (Py_ssize_t)j, i64(r->events));
            put(&t, cf, (Py_ssize_t)j, i64(r->first_ts));
            put(&t, cl, (Py_ssize_t)j, i64(r->last_end));
            put(&t, cr, (Py_ssize_t)j, opt(r->rank.v, r->rank.n > 0));
            put(&t, cc, (Py_ssize_t)j, i64(r->cmd_hash));
        }
        if (!tab_done(&t)) goto fail;
        Py_ssize_t n = 0;
        for (size_t j = 0; j < st->nproc; j++) n += st->proc[j].io > 0;
        if (!tab_init(&t, res, "procfam", n)) goto fail;
        Col *dh = tab_col(&t, "hkey"), *dp = tab_col(&t, "pid");
        Col *fc[10];
        famcols_cols(&t, fc);
        i = 0;
        for (size_t j = 0; j < st->nproc; j++) {
            const ProcRow *r = &st->proc[j];
            if (!r->io) continue;
            put(&t, dh, i, i64(r->hkey));
            put(&t, dp, i, opt(r->pid, r->pid_set));
            famcols_out(&t, i, &r->f, fc);
            i++;
        }
        if (!tab_done(&t)) goto fail;
    }
    /* steps: distinct (epoch, step) */
    {
        Map *m = &st->steps;
        if (!tab_init(&t, res, "steps", (Py_ssize_t)m->n)) goto fail;
        Col *ce = tab_col(&t, "epoch"), *cs = tab_col(&t, "step");
        i = 0;
        for (size_t j = 0; j <= m->mask; j++) {
            if (!m->v[j]) continue;
            put(&t, ce, i, i64((int64_t)m->a[j]));
            put(&t, cs, i, i64((int64_t)m->b[j]));
            i++;
        }
        if (!tab_done(&t)) goto fail;
    }
    /* epochspan */
    {
        if (!tab_init(&t, res, "epochspan", (Py_ssize_t)st->nepochs)) goto fail;
        Col *ch = tab_col(&t, "hkey"), *ci = tab_col(&t, "host_inline"), *cp = tab_col(&t, "pid"),
                 *ce = tab_col(&t, "epoch"), *cf = tab_col(&t, "first_ts"), *cl = tab_col(&t, "last_end");
        for (size_t j = 0; j < st->nepochs; j++) {
            const EpochRow *r = &st->epochs[j];
            const ProcRow *p = &st->proc[r->proc];
            put(&t, ch, (Py_ssize_t)j, i64(p->hkey));
            put(&t, ci, (Py_ssize_t)j, boolv(r->host_inline));
            put(&t, cp, (Py_ssize_t)j, opt(p->pid, p->pid_set));
            put(&t, ce, (Py_ssize_t)j, i64(r->epoch));
            put(&t, cf, (Py_ssize_t)j, i64(r->first_ts));
            put(&t, cl, (Py_ssize_t)j, i64(r->last_end));
        }
        if (!tab_done(&t)) goto fail;
    }
    /* meta */
    {
        if (!tab_init(&t, res, "meta", (Py_ssize_t)st->nmeta)) goto fail;
        Col *ck = tab_col(&t, "kind"), *ch = tab_col(&t, "h"), *cv = tab_col(&t, "v");
        for (size_t j = 0; j < st->nmeta; j++) {
            put(&t, ck, (Py_ssize_t)j, i64(st->meta[j].kind));
            put(&t, ch, (Py_ssize_t)j, i64(st->meta[j].h));
            put(&t, cv, (Py_ssize_t)j, i64(st->meta[j].v));
        }
        if (!tab_done(&t)) goto fail;
    }
    /* start: first non-empty version and tracer configuration */
    {
        if (!tab_init(&t, res, "start", 1)) goto fail;
        Col *cv = tab_col(&t, "version"), *cc = tab_col(&t, "cfg");
        put(&t, cv, 0, i64(st->version));
        put(&t, cc, 0, i64(st->cfgtxt));
        if (!tab_done(&t)) goto fail;
    }
    if (st->time_on) { /* bins in time order, from t_lo to t_hi (empty when no I/O call) */
        Py_ssize_t n = 0;
        for (int64_t j = 0; j < st->t_cap * NFAM; j++) n += st->time_count[j] > 0;
        if (!tab_init(&t, res, "time", n)) goto fail;
        Col *cb = tab_col(&t, "bin"), *cf = tab_col(&t, "fam"), *cc = tab_col(&t, "count"),
                 *cy = tab_col(&t, "bytes"), *ct = tab_col(&t, "time_us");
        i = 0;
        for (int64_t b = st->t_lo; st->t_any; b++) {
            size_t s = (size_t)((uint64_t)b & (uint64_t)(st->t_cap - 1)) * NFAM;
            for (int f = 0; f < NFAM; f++) {
                if (!st->time_count[s + f]) continue;
                put(&t, cb, i, i64(b));
                put(&t, cf, i, i64(f));
                put(&t, cc, i, i64(st->time_count[s + f]));
                put(&t, cy, i, sumv(&st->time_bytes[s + f]));
                put(&t, ct, i, sumv(&st->time_time[s + f]));
                i++;
            }
            if (b == st->t_hi) break;
        }
        if (!tab_done(&t)) goto fail;
    }
    /* acc: access-pattern counts per (file key, read/write) */
    {
        if (!tab_init(&t, res, "acc", (Py_ssize_t)acc->n)) goto fail;
        Col *ck = tab_col(&t, "fk"), *cw = tab_col(&t, "is_write"), *c1 = tab_col(&t, "consecutive"),
                 *c2 = tab_col(&t, "sequential"), *c3 = tab_col(&t, "random"), *c4 = tab_col(&t, "positioned"),
                 *c5 = tab_col(&t, "misaligned"), *c6 = tab_col(&t, "random_time_us"),
                 *c7 = tab_col(&t, "misaligned_time_us");
        for (size_t j = 0; j < acc->n; j++) {
            const AccRow *a = &acc->rows[j];
            Py_ssize_t q = (Py_ssize_t)j;
            put(&t, ck, q, i64(acc->fk[j]));
            put(&t, cw, q, boolv(acc->w[j]));
            put(&t, c1, q, i64(a->consecutive));
            put(&t, c2, q, i64(a->sequential));
            put(&t, c3, q, i64(a->random));
            put(&t, c4, q, i64(a->positioned));
            put(&t, c5, q, i64(a->misaligned));
            put(&t, c6, q, sumv(&a->random_time));
            put(&t, c7, q, sumv(&a->misaligned_time));
        }
        if (!tab_done(&t)) goto fail;
    }
    /* ovl: per process, I/O wall time, its overlap with compute, compute wall time */
    {
        Py_ssize_t n = 0;
        for (size_t j = 0; j < st->nproc; j++) n += ovl[j].any;
        if (!tab_init(&t, res, "ovl", n)) goto fail;
        Col *cg = tab_col(&t, "g"), *c1 = tab_col(&t, "io_wall_us"), *c2 = tab_col(&t, "overlap_us"),
                 *c3 = tab_col(&t, "compute_wall_us");
        i = 0;
        for (size_t j = 0; j < st->nproc; j++) {
            if (!ovl[j].any) continue;
            put(&t, cg, i, i64((int64_t)j));
            put(&t, c1, i, i64(ovl[j].io_wall));
            put(&t, c2, i, i64(ovl[j].overlap));
            put(&t, c3, i, i64(ovl[j].c_wall));
            i++;
        }
        if (!tab_done(&t)) goto fail;
    }
    return res;
fail:
    Py_DECREF(res);
    return NULL;
}

/* ------------------------------------------------------------------------------ */
/* module                                                                          */

static void st_free(St *st) {
    interner_free(&st->str);
    free(st->np);
    free(st->cp);
    free(st->famrows);
    free(st->famrow_used);
    map_free(&st->path_map);
    free(st->path);
    map_free(&st->pathproc);
    map_free(&st->proc_map);
    free(st->proc);
    map_free(&st->name_map);
    free(st->names);
    map_free(&st->layer_map);
    free(st->layer);
    map_free(&st->epoch_map);
    free(st->epochs);
    map_free(&st->steps);
    map_free(&st->iface_map);
    free(st->iface);
    map_free(&st->meta_map);
    free(st->meta);
    free(st->time_count);
    free(st->time_bytes);
    free(st->time_time);
    free(st->time_count2);
    free(st->time_bytes2);
    free(st->time_time2);
    map_free(&st->gfile_map);
    free(st->gfk);
    free(st->pos);
    free(st->iospan);
    free(st->cspan);
    free(st->scratch);
    free(st->last_hkey_buf);
}

static int copy_name(char *dst, size_t cap, PyObject *o) {
    Py_ssize_t n;
    const char *s = PyUnicode_AsUTF8AndSize(o, &n);
    if (!s) return 0;
    if ((size_t)n >= cap) {
        PyErr_SetString(PyExc_ValueError, "configuration name too long");
        return 0;
    }
    memcpy(dst, s, (size_t)n);
    dst[n] = 0;
    return 1;
}

static int parse_config(PyObject *o, Config *c) {
    PyObject *calls, *io, *comp, *bins;
    PyObject *sub;
    long long small, o_append, seek_set, align, max_ts, max_value, max_line;
    memset(c, 0, sizeof(*c));
    if (!PyArg_ParseTuple(o, "O!O!O!UO!LLLLLLL", &PyTuple_Type, &calls, &PyTuple_Type, &io, &PyTuple_Type,
                          &comp, &sub, &PyTuple_Type, &bins, &small, &o_append, &seek_set, &align, &max_ts,
                          &max_value, &max_line))
        return 0;
    c->max_ts = max_ts;
    c->max_value = max_value;
    c->max_line = max_line > 0 ? (size_t)max_line : 1;
    c->ncalls = (size_t)PyTuple_GET_SIZE(calls);
    c->calls = calloc(c->ncalls ? c->ncalls : 1, sizeof(Call));
    if (!c->calls) {
        PyErr_NoMemory();
        return 0;
    }
    for (size_t i = 0; i < c->ncalls; i++) {
        PyObject *name;
        int fam, role, item, setter;
        if (!PyArg_ParseTuple(PyTuple_GET_ITEM(calls, i), "Uiipi", &name, &fam, &role, &item, &setter)) return 0;
        if (!copy_name(c->calls[i].name, sizeof(c->calls[i].name), name)) return 0;
        c->calls[i].fam = (uint8_t)fam;
        c->calls[i].role = (uint8_t)role;
        c->calls[i].item = (uint8_t)item;
        c->calls[i].setter = (uint8_t)setter;
    }
    if (PyTuple_GET_SIZE(io) > 8 || PyTuple_GET_SIZE(comp) > 8 || PyTuple_GET_SIZE(bins) > MAX_BINS ||
        PyTuple_GET_SIZE(bins) < 1) {
        PyErr_SetString(PyExc_ValueError, "configuration out of range");
        return 0;
    }
    c->nio = (int)PyTuple_GET_SIZE(io);
    for (int i = 0; i < c->nio; i++)
        if (!copy_name(c->io_cats[i], sizeof(c->io_cats[i]), PyTuple_GET_ITEM(io, i))) return 0;
    c->ncompute = (int)PyTuple_GET_SIZE(comp);
    for (int i = 0; i < c->ncompute; i++)
        if (!copy_name(c->compute_cats[i], sizeof(c->compute_cats[i]), PyTuple_GET_ITEM(comp, i))) return 0;
    if (!copy_name(c->compute_sub, sizeof(c->compute_sub), sub)) return 0;
    c->nbins = (int)PyTuple_GET_SIZE(bins);
    for (int i = 0; i < c->nbins; i++) {
        c->bins[i] = PyLong_AsLongLong(PyTuple_GET_ITEM(bins, i));
        if (PyErr_Occurred()) return 0;
    }
    c->small = small;
    c->o_append = o_append;
    c->seek_set = seek_set;
    c->align = align > 0 ? align : 1;
    return 1;
}

PyDoc_STRVAR(scan_doc,
             "scan(path, config, scale, file_view, time_bins, batch_rows) -> dict\n\n"
             "time_bins: None, or the size of the time view's ring of fine bins (a power of two).\n"
             "Read one trace file in a single pass and return its per-file tables.\n"
             "Raises Fallback when the file holds anything this scanner does not fully\n"
             "understand; the caller then reads it with the DuckDB path.");

static PyObject *py_scan(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *path_obj, *cfg_obj, *bins_obj;
    int scale, file_view;
    long long batch_rows;
    if (!PyArg_ParseTuple(args, "O&O!ipOL", PyUnicode_FSConverter, &path_obj, &PyTuple_Type, &cfg_obj, &scale,
                          &file_view, &bins_obj, &batch_rows))
        return NULL;
    Config cfg;
    St st;
    memset(&st, 0, sizeof(st));
    PyObject *result = NULL;
    AccTab acc;
    memset(&acc, 0, sizeof(acc));
    Ovl *ovl = NULL;
    if (!parse_config(cfg_obj, &cfg)) goto out;
    st.cfg = &cfg;
    st.scale = scale;
    st.file_view = file_view;
    st.batch_rows = batch_rows > 0 ? batch_rows : 1;
    if (bins_obj != Py_None) {
        long long n = PyLong_AsLongLong(bins_obj);
        if (n == -1 && PyErr_Occurred()) goto out;
        if (n < 2 || n > (1 << 24) || (n & (n - 1))) {
            PyErr_SetString(PyExc_ValueError, "time bins: a power of two from 2 to 2**24");
            goto out;
        }
        st.time_on = 1;
        st.t_cap = n;
        st.time_count = calloc((size_t)n * NFAM, sizeof(int64_t));
        st.time_bytes = calloc((size_t)n * NFAM, sizeof(Sum));
        st.time_time = calloc((size_t)n * NFAM, sizeof(Sum));
        st.time_count2 = calloc((size_t)n * NFAM, sizeof(int64_t));
        st.time_bytes2 = calloc((size_t)n * NFAM, sizeof(Sum));
        st.time_time2 = calloc((size_t)n * NFAM, sizeof(Sum));
        if (!st.time_count || !st.time_bytes || !st.time_time || !st.time_count2 || !st.time_bytes2 ||
            !st.time_time2) {
            PyErr_NoMemory();
            goto out;
        }
    }
    if (!interner_init(&st.str) || !map_init(&st.path_map, 1024) || !map_init(&st.pathproc, 1024) ||
        !map_init(&st.proc_map, 64) || !map_init(&st.name_map, 256) || !map_init(&st.layer_map, 64) ||
        !map_init(&st.epoch_map, 64) || !map_init(&st.steps, 64) || !map_init(&st.iface_map, 64) ||
        !map_init(&st.meta_map, 1024) || !map_init(&st.gfile_map, 1024)) {
        PyErr_NoMemory();
        goto out;
    }
    int ok;
    const char *path = PyBytes_AS_STRING(path_obj);
    Py_BEGIN_ALLOW_THREADS
    ok = run_file(&st, path);
    if (ok && st.rows == 0) {
        st.why = "no trace event in the file";
        ok = 0;
    }
    if (ok && !classify(&st, &acc)) {
        if (!st.why) st.why = FAIL_OOM;
        ok = 0;
    }
    free(st.pos); /* the overlap pass does not need it: peak memory is the larger pass */
    st.pos = NULL;
    st.npos = st.poscap = 0;
    if (ok) {
        ovl = calloc(st.nproc ? st.nproc : 1, sizeof(Ovl));
        if (!ovl || !overlap_pass(&st, ovl)) {
            if (!st.why) st.why = FAIL_OOM;
            ok = 0;
        }
    }
    Py_END_ALLOW_THREADS
    if (!ok) {
        PyErr_SetString(FallbackError, st.why ? st.why : "unknown");
        goto out;
    }
    result = build_result(&st, &acc, ovl);
    if (!result && PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) {
        PyErr_Clear();
        PyErr_SetString(FallbackError, "a string is not valid UTF-8");
    }
out:
    Py_DECREF(path_obj);
    free(cfg.calls);
    map_free(&acc.map);
    free(acc.rows);
    free(acc.fk);
    free(acc.w);
    free(ovl);
    st_free(&st);
    return result;
}

static PyMethodDef methods[] = {
    {"scan", py_scan, METH_VARARGS, scan_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_fastscan",
    "Native single-pass reader for dftracer traces (see reader.py for how it is used).", -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__fastscan(void) {
    if (!init_tables()) {
        PyErr_SetString(PyExc_RuntimeError, "_fastscan: no collision-free key table");
        return NULL;
    }
    PyObject *m = PyModule_Create(&module);
    if (!m) return NULL;
    FallbackError = PyErr_NewExceptionWithDoc("_fastscan.Fallback",
                                              "The file holds something the native scanner does not fully "
                                              "understand; read it with the DuckDB path.",
                                              PyExc_Exception, NULL);
    if (!FallbackError || PyModule_AddObject(m, "Fallback", FallbackError) < 0) {
        Py_XDECREF(FallbackError);
        Py_DECREF(m);
        return NULL;
    }
    Py_INCREF(FallbackError);
    if (PyModule_AddStringConstant(m, "INFLATE", INFLATE_NAME) < 0 || PyModule_AddIntConstant(m, "ABI", 1) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
