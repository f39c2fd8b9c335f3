/*
 * One Redis command as RESP2 bytes, in C: the same bytes as
 * crawler.redisconn.resp.command_python, about ten times faster (a frontier
 * step or a batch of script calls has hundreds of arguments per page).
 *
 * Arguments: bytes as they are, str as UTF-8 (a lone surrogate raises
 * UnicodeEncodeError, as str.encode() does), int (bool included) and float as
 * b"%d" formats them (a float is truncated); anything else is a TypeError.
 *
 * Built by setup.py when a C compiler is there; crawler.redisconn.resp falls
 * back to pure Python otherwise.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>

/* Decimal digits of n (n >= 0). */
static Py_ssize_t
digits(Py_ssize_t n)
{
    Py_ssize_t count = 1;
    while (n >= 10) {
        n /= 10;
        count++;
    }
    return count;
}

/* Writes n in decimal at out; returns the position after it. */
static char *
write_size(char *out, unsigned long long n)
{
    char reversed[24];
    int length = 0;
    do {
        reversed[length++] = (char)('0' + n % 10);
        n /= 10;
    } while (n > 0);
    while (length > 0) {
        *out++ = reversed[--length];
    }
    return out;
}

/* Each argument as (pointer, length), from bytes it owns or borrows. */
typedef struct {
    const char *data;
    Py_ssize_t size;
    char number[24]; /* an integer that fits 64 bits, formatted here */
} Piece;

static PyObject *
command(PyObject *self, PyObject *args)
{
    Py_ssize_t count = PyTuple_GET_SIZE(args);
    Piece stack_pieces[64];
    Piece *pieces = stack_pieces;
    /* Integers are formatted into owned bytes objects, kept until the end. */
    PyObject *owned = NULL;
    PyObject *result = NULL;

    if (count > 64) {
        pieces = PyMem_Malloc(sizeof(Piece) * (size_t)count);
        if (pieces == NULL) {
            return PyErr_NoMemory();
        }
    }
    Py_ssize_t total = 1 + digits(count) + 2;
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *arg = PyTuple_GET_ITEM(args, i);
        if (PyBytes_Check(arg)) {
            pieces[i].data = PyBytes_AS_STRING(arg);
            pieces[i].size = PyBytes_GET_SIZE(arg);
        }
        else if (PyUnicode_Check(arg)) {
            pieces[i].data = PyUnicode_AsUTF8AndSize(arg, &pieces[i].size);
            if (pieces[i].data == NULL) {
                goto done;
            }
        }
        else if (PyLong_Check(arg) || PyFloat_Check(arg)) {
            if (PyLong_Check(arg)) {
                int overflow = 0;
                long long value = PyLong_AsLongLongAndOverflow(arg, &overflow);
                if (!overflow) {
                    if (value == -1 && PyErr_Occurred()) {
                        goto done;
                    }
                    char *end = pieces[i].number;
                    unsigned long long magnitude = (unsigned long long)value;
                    if (value < 0) {
                        *end++ = '-';
                        magnitude = 0ULL - magnitude;
                    }
                    end = write_size(end, magnitude);
                    pieces[i].size = end - pieces[i].number;
                    pieces[i].data = pieces[i].number;
                    total += 1 + digits(pieces[i].size) + 2 + pieces[i].size + 2;
                    continue;
                }
            }
            PyObject *number = PyNumber_Long(arg);
            if (number == NULL) {
                goto done;
            }
            PyObject *text = PyObject_Str(number);
            Py_DECREF(number);
            if (text == NULL) {
                goto done;
            }
            PyObject *encoded = PyUnicode_AsASCIIString(text);
            Py_DECREF(text);
            if (encoded == NULL) {
                goto done;
            }
            if (owned == NULL && (owned = PyList_New(0)) == NULL) {
                Py_DECREF(encoded);
                goto done;
            }
            int appended = PyList_Append(owned, encoded);
            Py_DECREF(encoded);
            if (appended < 0) {
                goto done;
            }
            pieces[i].data = PyBytes_AS_STRING(encoded);
            pieces[i].size = PyBytes_GET_SIZE(encoded);
        }
        else {
            PyErr_Format(PyExc_TypeError, "a Redis argument must be bytes, str or a number, not %.100s",
                         Py_TYPE(arg)->tp_name);
            goto done;
        }
        total += 1 + digits(pieces[i].size) + 2 + pieces[i].size + 2;
    }
    result = PyBytes_FromStringAndSize(NULL, total);
    if (result == NULL) {
        goto done;
    }
    char *out = PyBytes_AS_STRING(result);
    *out++ = '*';
    out = write_size(out, (unsigned long long)count);
    *out++ = '\r';
    *out++ = '\n';
    for (Py_ssize_t i = 0; i < count; i++) {
        *out++ = '$';
        out = write_size(out, (unsigned long long)pieces[i].size);
        *out++ = '\r';
        *out++ = '\n';
        memcpy(out, pieces[i].data, (size_t)pieces[i].size);
        out += pieces[i].size;
        *out++ = '\r';
        *out++ = '\n';
    }
done:
    Py_XDECREF(owned);
    if (pieces != stack_pieces) {
        PyMem_Free(pieces);
    }
    return result;
}

static PyMethodDef methods[] = {
    {"command", command, METH_VARARGS, "command(*args) -> bytes: one Redis command as RESP2."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_resp", "Redis commands as RESP2 bytes, in C.", -1, methods,
};

PyMODINIT_FUNC
PyInit__resp(void)
{
    return PyModule_Create(&module);
}
