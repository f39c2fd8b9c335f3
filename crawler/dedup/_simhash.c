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
#define STACK_BYTES 512

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

/* The fingerprint of count tokens (text[i], size[i]) as an int, None for no tokens; NULL with an exception set. */
static PyObject *
fingerprint(const char **text, const Py_ssize_t *size, Py_ssize_t count)
{
    if (count == 0) {
        Py_RETURN_NONE;
    }
    uint32_t bits[64] = {0};
    uint64_t lanes[8] = {0};
    int pending = 0;
    Py_ssize_t features = count < SHINGLE ? count : count - SHINGLE + 1;
    char stack[STACK_BYTES];
    char *buffer = stack;
    size_t capacity = STACK_BYTES;
    for (Py_ssize_t i = 0; i < features; i++) {
        uint64_t hash;
        if (count < SHINGLE) {
            hash = XXH3_64bits(text[i], (size_t)size[i]);
        } else {
            size_t need = (size_t)(size[i] + size[i + 1] + size[i + 2]) + 2;
            if (need > capacity) {
                char *grown = PyMem_Malloc(need);
                if (grown == NULL) {
                    PyErr_NoMemory();
                    if (buffer != stack) {
                        PyMem_Free(buffer);
                    }
                    return NULL;
                }
                if (buffer != stack) {
                    PyMem_Free(buffer);
                }
                buffer = grown;
                capacity = need;
            }
            char *at = buffer;
            memcpy(at, text[i], (size_t)size[i]);
            at += size[i];
            *at++ = ' ';
            memcpy(at, text[i + 1], (size_t)size[i + 1]);
            at += size[i + 1];
            *at++ = ' ';
            memcpy(at, text[i + 2], (size_t)size[i + 2]);
            hash = XXH3_64bits(buffer, need);
        }
        for (int position = 0; position < 8; position++) {
            lanes[position] += SPREAD[(hash >> (8 * position)) & 0xFF];
        }
        if (++pending == 255) {
            flush_lanes(lanes, bits);
            pending = 0;
        }
    }
    flush_lanes(lanes, bits);
    if (buffer != stack) {
        PyMem_Free(buffer);
    }
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
    /* The UTF-8 of every token first: the list cannot change while we hash
       (no Python code runs in between), and each is read up to 3 times. */
    const char **text = PyMem_Malloc(sizeof(char *) * (size_t)count);
    Py_ssize_t *size = PyMem_Malloc(sizeof(Py_ssize_t) * (size_t)count);
    PyObject *result = NULL;
    if (text == NULL || size == NULL) {
        PyErr_NoMemory();
        goto done;
    }
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
    }
    result = fingerprint(text, size, count);
done:
    PyMem_Free(text);
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
    /* Every word lowercased into one buffer (each word at most as long as the text); its spans. */
    char *lowered = PyMem_Malloc((size_t)length + 1);
    Py_ssize_t spans_capacity = length / 2 + 1;
    if (max_words < spans_capacity) {
        spans_capacity = max_words;
    }
    const char **text = PyMem_Malloc(sizeof(char *) * (size_t)(spans_capacity + 1));
    Py_ssize_t *size = PyMem_Malloc(sizeof(Py_ssize_t) * (size_t)(spans_capacity + 1));
    PyObject *result = NULL;
    if (lowered == NULL || text == NULL || size == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    Py_ssize_t count = 0;
    Py_ssize_t i = 0;
    while (i < length && count < spans_capacity) {
        while (i < length && !WORD[data[i]]) {
            i++;
        }
        if (i == length) {
            break;
        }
        Py_ssize_t start = i;
        while (i < length && WORD[data[i]]) {
            lowered[i] = WORD[data[i]];
            i++;
        }
        text[count] = lowered + start;
        size[count] = i - start;
        count++;
    }
    result = fingerprint(text, size, count);
done:
    PyMem_Free(lowered);
    PyMem_Free(text);
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
