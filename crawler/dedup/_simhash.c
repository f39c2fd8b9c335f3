/*
 * The SimHash of word 3-shingles in C: the same fingerprint as
 * crawler.dedup.text.simhash64_python (version 2), about ten times faster.
 *
 * Features: each run of 3 consecutive tokens joined by one space (a list of
 * fewer than 3 tokens: each token), hashed as UTF-8 with XXH3-64 (seed 0,
 * xxhash's own header, as the `xxhash` package does). Bit i of the result is
 * set when more than half of the features have bit i set.
 *
 * Built by setup.py when a C compiler and xxhash.h (Debian: libxxhash-dev)
 * are there; crawler.dedup.text falls back to pure Python otherwise.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#define SHINGLE 3

/* SPREAD[b]: byte b's 8 bits as 8 bytes of 0 or 1 (bit j in byte j), so one
   64-bit add counts 8 bits at once; 8-bit lanes are flushed every 255 features. */
static uint64_t SPREAD[256];

static void
fill_spread(void)
{
    for (int b = 0; b < 256; b++) {
        uint64_t lanes = 0;
        for (int j = 0; j < 8; j++) {
            lanes |= (uint64_t)((b >> j) & 1) << (8 * j);
        }
        SPREAD[b] = lanes;
    }
}

static void
flush_lanes(uint64_t lanes[8], uint32_t bits[64])
{
    for (int position = 0; position < 8; position++) {
        for (int j = 0; j < 8; j++) {
            bits[8 * position + j] += (uint32_t)((lanes[position] >> (8 * j)) & 0xFF);
        }
        lanes[position] = 0;
    }
}

/* The fingerprint of count tokens laid out in joined, one space between two (token i: size[i] bytes from
   start[i]), as an int, None for no tokens. A shingle is then one span of joined: no copy per shingle. */
static PyObject *
fingerprint(const char *joined, const Py_ssize_t *start, const Py_ssize_t *size, Py_ssize_t count)
{
    if (count == 0) {
        Py_RETURN_NONE;
    }
    uint32_t bits[64] = {0};
    uint64_t lanes[8] = {0};
    int pending = 0;
    Py_ssize_t features = count < SHINGLE ? count : count - SHINGLE + 1;
    for (Py_ssize_t i = 0; i < features; i++) {
        Py_ssize_t last = count < SHINGLE ? i : i + SHINGLE - 1;
        uint64_t hash = XXH3_64bits(joined + start[i], (size_t)(start[last] + size[last] - start[i]));
        for (int position = 0; position < 8; position++) {
            lanes[position] += SPREAD[(hash >> (8 * position)) & 0xFF];
        }
        if (++pending == 255) {
            flush_lanes(lanes, bits);
            pending = 0;
        }
    }
    flush_lanes(lanes, bits);
    uint64_t value = 0;
    for (int bit = 0; bit < 64; bit++) {
        if (2 * (uint64_t)bits[bit] > (uint64_t)features) {
            value |= (uint64_t)1 << bit;
        }
    }
    return PyLong_FromUnsignedLongLong(value);
}

static PyObject *
simhash64(PyObject *module, PyObject *tokens)
{
    if (!PyList_CheckExact(tokens)) {
        PyErr_SetString(PyExc_TypeError, "simhash64() takes a list of str");
        return NULL;
    }
    Py_ssize_t count = PyList_GET_SIZE(tokens);
    if (count == 0) {
        Py_RETURN_NONE;
    }
    /* The tokens' UTF-8 laid out with one space between two (the list cannot change while we hash: no
       Python code runs in between). */
    const char **text = PyMem_Malloc(sizeof(char *) * (size_t)count);
    Py_ssize_t *start = PyMem_Malloc(sizeof(Py_ssize_t) * (size_t)count);
    Py_ssize_t *size = PyMem_Malloc(sizeof(Py_ssize_t) * (size_t)count);
    char *joined = NULL;
    PyObject *result = NULL;
    if (text == NULL || start == NULL || size == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    Py_ssize_t total = count - 1;
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *token = PyList_GET_ITEM(tokens, i);
        if (!PyUnicode_Check(token)) {
            PyErr_SetString(PyExc_TypeError, "simhash64() takes a list of str");
            goto done;
        }
        text[i] = PyUnicode_AsUTF8AndSize(token, &size[i]);
        if (text[i] == NULL) {
            goto done;
        }
        total += size[i];
    }
    joined = PyMem_Malloc((size_t)total + 1);
    if (joined == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    Py_ssize_t at = 0;
    for (Py_ssize_t i = 0; i < count; i++) {
        if (i > 0) {
            joined[at++] = ' ';
        }
        start[i] = at;
        memcpy(joined + at, text[i], (size_t)size[i]);
        at += size[i];
    }
    result = fingerprint(joined, start, size, count);
done:
    PyMem_Free(joined);
    PyMem_Free(text);
    PyMem_Free(start);
    PyMem_Free(size);
    return result;
}

/* WORD[b]: byte b lowercased if it is an ASCII word character ([0-9A-Za-z_], as \w in ASCII), else 0. */
static char WORD[256];

static void
fill_word(void)
{
    for (int b = 0; b < 128; b++) {
        if ((b >= '0' && b <= '9') || (b >= 'a' && b <= 'z') || b == '_') {
            WORD[b] = (char)b;
        } else if (b >= 'A' && b <= 'Z') {
            WORD[b] = (char)(b | 0x20);
        }
    }
}

/* simhash64_text(text, max_words): the fingerprint of an ASCII text's first max_words lowercased \w+ runs,
   as simhash64(words(text, max_words)) gives it, without a Python string per word. */
static PyObject *
simhash64_text(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2 || !PyUnicode_Check(args[0]) || !PyLong_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "simhash64_text() takes a str and an int");
        return NULL;
    }
    PyObject *source = args[0];
    if (!PyUnicode_IS_ASCII(source)) {
        PyErr_SetString(PyExc_ValueError, "simhash64_text() takes ASCII text only");
        return NULL;
    }
    Py_ssize_t max_words = PyLong_AsSsize_t(args[1]);
    if (max_words == -1 && PyErr_Occurred()) {
        return NULL;
    }
    if (max_words < 0) {
        PyErr_SetString(PyExc_ValueError, "simhash64_text() takes max_words >= 0");
        return NULL;
    }
    const unsigned char *data = PyUnicode_1BYTE_DATA(source);
    Py_ssize_t length = PyUnicode_GET_LENGTH(source);
    /* Every word lowercased into one buffer, one space between two (no longer than the text: two words
       of the text have at least one character between them); the words' spans. */
    char *joined = PyMem_Malloc((size_t)length + 1);
    Py_ssize_t spans_capacity = length / 2 + 1;
    if (max_words < spans_capacity) {
        spans_capacity = max_words;
    }
    Py_ssize_t *start = PyMem_Malloc(sizeof(Py_ssize_t) * (size_t)(spans_capacity + 1));
    Py_ssize_t *size = PyMem_Malloc(sizeof(Py_ssize_t) * (size_t)(spans_capacity + 1));
    PyObject *result = NULL;
    if (joined == NULL || start == NULL || size == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    Py_ssize_t count = 0;
    Py_ssize_t at = 0;
    Py_ssize_t i = 0;
    while (i < length && count < spans_capacity) {
        while (i < length && !WORD[data[i]]) {
            i++;
        }
        if (i == length) {
            break;
        }
        if (count > 0) {
            joined[at++] = ' ';
        }
        start[count] = at;
        while (i < length && WORD[data[i]]) {
            joined[at++] = WORD[data[i]];
            i++;
        }
        size[count] = at - start[count];
        count++;
    }
    result = fingerprint(joined, start, size, count);
done:
    PyMem_Free(joined);
    PyMem_Free(start);
    PyMem_Free(size);
    return result;
}

static PyMethodDef methods[] = {
    {"simhash64", simhash64, METH_O,
     "simhash64(tokens: list[str], /) -> int | None\n--\n\n"
     "The 64-bit SimHash (version 2) of the tokens' word 3-shingles, or None for no tokens."},
    {"simhash64_text", (PyCFunction)(void (*)(void))simhash64_text, METH_FASTCALL,
     "simhash64_text(text: str, max_words: int, /) -> int | None\n--\n\n"
     "simhash64(words(text, max_words)) of an ASCII text, without a list of words (ValueError otherwise)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_simhash", "SimHash of word 3-shingles (version 2) in C.", -1, methods,
};

PyMODINIT_FUNC
PyInit__simhash(void)
{
    fill_spread();
    fill_word();
    return PyModule_Create(&module);
}
