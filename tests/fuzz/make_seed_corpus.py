"""Writes the fuzz harnesses' seed corpus (tests/fuzz/corpus/<harness>/): small valid files of
every kind the readers take, and nearly valid ones that stop at each check along the way.

Run from anywhere: python3 tests/fuzz/make_seed_corpus.py. The files it writes are checked in;
files that the fuzzer found (named finding-*) are kept beside them and never rewritten here.
"""

import io
import pathlib
import struct

import numpy as np

CORPUS = pathlib.Path(__file__).resolve().parent / "corpus"
MAGIC = b"\x93NUMPY"

# The raw harness's first byte picks the dtype in this order (tally::cli::all_dtypes).
RAW_DTYPES = ["int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "float16", "bfloat16", "float32",
              "float64"]


def numpy_file(a, version=(1, 0)):
    """The bytes numpy writes for `a`."""
    out = io.BytesIO()
    np.lib.format.write_array(out, a, version=version)
    return out.getvalue()


def npy_by_hand(dict_text, data=b"", version=1, length=None, pad=True):
    """A .npy file with the header dict `dict_text` as given, valid or not; `length` overrides the length field."""
    header = dict_text.encode("latin-1") if isinstance(dict_text, str) else dict_text
    length_field_end = 10 if version == 1 else 12
    if pad:
        header += b" " * ((64 - (length_field_end + len(header) + 1) % 64) % 64) + b"\n"
    if length is None:
        length = len(header)
    field = struct.pack("<H", length) if version == 1 else struct.pack("<I", length)
    return MAGIC + bytes([version, 0]) + field + header + data


def write(harness, name, content):
    folder = CORPUS / harness
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_bytes(content)


def npy_corpus():
    h = "npy_file"
    values = np.array([0, 1, 2, 127], dtype=np.int64)
    for dtype in ["int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "float16", "float32", "float64"]:
        write(h, f"valid-{dtype}.npy", numpy_file(values.astype(dtype)))
    floats = np.array([np.nan, -np.inf, np.inf, -0.0, 5e-324, 1.5], dtype=np.float64)
    write(h, "valid-float64-specials.npy", numpy_file(floats))
    write(h, "valid-float16-specials.npy", numpy_file(np.array([np.nan, np.inf, 6e-8, -65504], dtype=np.float16)))
    for version in [(2, 0), (3, 0)]:
        write(h, f"valid-version-{version[0]}.0.npy", numpy_file(np.arange(3, dtype=np.int16), version))
    write(h, "valid-0d.npy", numpy_file(np.float32(2.5)))
    write(h, "valid-2d.npy", numpy_file(np.arange(6, dtype=np.uint8).reshape(2, 3)))
    write(h, "valid-3d.npy", numpy_file(np.zeros((1, 2, 2), dtype=np.int32)))
    write(h, "valid-empty.npy", numpy_file(np.zeros(0, dtype=np.float32)))
    write(h, "valid-empty-2d.npy", numpy_file(np.zeros((2, 0), dtype=np.int8)))
    write(h, "valid-trailing-bytes.npy", numpy_file(np.arange(2, dtype=np.int32)) + b"\1\2\3")
    write(h, "valid-python2-long-shape.npy",
          npy_by_hand("{'descr': '<i2', 'fortran_order': False, 'shape': (2L,), }", b"\1\0\2\0"))
    write(h, "valid-double-quotes.npy",
          npy_by_hand('{"descr": "|u1", "fortran_order": False, "shape": (1,)}', b"\7"))
    write(h, "valid-one-byte-any-order.npy", npy_by_hand("{'descr': '<i1', 'fortran_order': False, 'shape': (1,)}", b"\7"))
    # Every array numpy saves for the types tally counts: either byte order, Fortran order, bool.
    write(h, "valid-big-endian-int32.npy", numpy_file(np.arange(2, dtype=">i4")))
    write(h, "valid-big-endian-float16.npy", numpy_file(np.array([1.5, -np.inf, 6e-8], dtype=">f2")))
    write(h, "valid-big-endian-fortran-float64.npy",
          numpy_file(np.asfortranarray(np.arange(6, dtype=">f8").reshape(2, 3))))
    write(h, "valid-fortran-order.npy", numpy_file(np.asfortranarray(np.ones((2, 2), dtype=np.float32))))
    write(h, "valid-bool.npy", numpy_file(np.array([True, False, True])))
    write(h, "valid-bool-not-0-or-1.npy", npy_by_hand("{'descr': '|b1', 'fortran_order': False, 'shape': (2,)}",
                                                      b"\2\xff"))
    # Nearly valid: each stops at one check.
    whole = numpy_file(np.arange(4, dtype=np.float64))
    write(h, "bad-magic-only.npy", MAGIC)
    write(h, "bad-truncated-header.npy", whole[:40])
    write(h, "bad-truncated-data.npy", whole[:-3])
    write(h, "bad-version-4.npy", MAGIC + b"\x04\x00" + whole[8:])
    write(h, "bad-version-1.1.npy", MAGIC + b"\x01\x01" + whole[8:])
    write(h, "bad-header-length-past-end.npy", npy_by_hand("{'descr': '<f8', 'fortran_order': False, 'shape': (0,)}",
                                                           length=4000))
    write(h, "bad-header-length-huge.npy", npy_by_hand("{'descr': '<f8', 'fortran_order': False, 'shape': (0,)}",
                                                       version=2, length=0xFFFFFFFF))
    write(h, "bad-shape-overflows-64-bits.npy",
          npy_by_hand("{'descr': '<f8', 'fortran_order': False, 'shape': (4294967296, 4294967296)}", b"\0" * 8))
    write(h, "bad-shape-past-data.npy",
          npy_by_hand("{'descr': '<f8', 'fortran_order': False, 'shape': (2305843009213693953,)}", b"\0" * 8))
    write(h, "bad-shape-negative.npy", npy_by_hand("{'descr': '<f8', 'fortran_order': False, 'shape': (-1,)}"))
    write(h, "bad-shape-not-a-tuple.npy", npy_by_hand("{'descr': '<f8', 'fortran_order': False, 'shape': [3]}"))
    write(h, "bad-descr-garbage.npy",
          npy_by_hand(b"{'descr': '\xff\x00\x1b[2J', 'fortran_order': False, 'shape': (1,)}", b"\0" * 8))
    write(h, "bad-descr-structured.npy", numpy_file(np.zeros(2, dtype=[("a", "<i4"), ("b", "<f4")])))
    write(h, "bad-descr-no-byte-order-for-a-wide-type.npy",
          npy_by_hand("{'descr': '|i4', 'fortran_order': False, 'shape': (1,)}", b"\0" * 4))
    write(h, "bad-descr-unsupported.npy", numpy_file(np.arange(2, dtype=np.uint64)))
    write(h, "bad-unexpected-field.npy",
          npy_by_hand("{'descr': '<f8', 'fortran_order': False, 'shape': (0,), 'extra': 1}"))
    write(h, "bad-missing-shape.npy", npy_by_hand("{'descr': '<f8', 'fortran_order': False}"))
    write(h, "bad-unterminated-string.npy", npy_by_hand("{'descr': '<f8", pad=False))
    write(h, "bad-text-after-dict.npy",
          npy_by_hand("{'descr': '<f8', 'fortran_order': False, 'shape': (0,)} junk"))


def raw_corpus():
    h = "raw_file"
    for index, dtype in enumerate(RAW_DTYPES):
        if dtype == "bfloat16":
            f32 = np.array([0.0, -1.5, np.inf, np.nan, 1e-40, 3e38], dtype=np.float32)
            data = (f32.view(np.uint32) >> 16).astype(np.uint16).tobytes()
        elif dtype.startswith("float"):
            data = np.array([0.0, -1.5, np.inf, np.nan, 1e-40, 6e4], dtype=np.float64).astype(dtype).tobytes()
        else:
            info = np.iinfo(dtype)
            data = np.array([info.min, 0, 1, info.max], dtype=dtype).tobytes()
        # Chunks of one sample and of several (byte 1 is the chunk size in bytes, less one).
        write(h, f"valid-{dtype}-small-chunks", bytes([index, 0]) + data)
        write(h, f"valid-{dtype}-one-chunk", bytes([index, 255]) + data)
        if np.dtype(dtype if dtype != "bfloat16" else "uint16").itemsize > 1:
            write(h, f"bad-{dtype}-misaligned", bytes([index, 7]) + data[:-1])
    write(h, "valid-empty-file", bytes([9, 3]))
    write(h, "npy-magic-in-a-raw-file", bytes([10, 3]) + numpy_file(np.arange(2, dtype=np.float64)))


def edges_corpus():
    h = "edges_file"
    write(h, "valid-text.txt", b"0 1 2.5 10\n")
    write(h, "valid-text-commas-comments.txt", b"# edges\n-1e3, -0.5,0\n\t+1 # the last\r\n2e3\n")
    write(h, "valid-text-specials.txt", b"-inf -0 nan inf +inf\n")
    write(h, "valid-text-subnormal.txt", b"0 5e-324 2.2250738585072014e-308\n")
    write(h, "valid-npy.npy", numpy_file(np.array([0.0, 0.5, 1.0])))
    # Edges of any numeric dtype numpy saves, in either byte order; 1-d, as numpy.histogram wants them.
    write(h, "valid-npy-float32.npy", numpy_file(np.array([0.0, 0.1, 1.0], dtype=np.float32)))
    write(h, "valid-npy-float16.npy", numpy_file(np.array([-1.0, 0.1, 65504.0], dtype=np.float16)))
    write(h, "valid-npy-big-endian.npy", numpy_file(np.array([0.0, 0.5, 1.0], dtype=">f8")))
    write(h, "valid-npy-int64.npy", numpy_file(np.arange(3, dtype=np.int64)))
    write(h, "valid-npy-int8.npy", numpy_file(np.array([-128, 0, 127], dtype=np.int8)))
    write(h, "valid-npy-fortran-order.npy",
          npy_by_hand("{'descr': '<f8', 'fortran_order': True, 'shape': (2,)}", np.array([0.0, 1.0]).tobytes()))
    write(h, "bad-npy-2d.npy", numpy_file(np.linspace(0, 1, 6).reshape(2, 3)))
    write(h, "bad-npy-2d-fortran.npy", numpy_file(np.asfortranarray(np.ones((2, 2)))))
    write(h, "bad-npy-0d.npy", numpy_file(np.float64(1.0)))
    write(h, "bad-npy-bool.npy", numpy_file(np.array([False, True])))
    write(h, "bad-npy-int64-beyond-2-53.npy", numpy_file(np.array([0, 2**60], dtype=np.int64)))
    write(h, "bad-text-empty.txt", b"")
    write(h, "bad-text-not-a-number.txt", b"0 1 two\n")
    write(h, "bad-text-two-signs.txt", b"0 +-1\n")
    write(h, "bad-text-beyond-float64.txt", b"0 1e309\n")
    write(h, "bad-text-hexadecimal.txt", b"0 0x10\n")
    write(h, "bad-text-binary.txt", b"\x00\xff\x1b[2J\x07" * 4)
    write(h, "bad-npy-truncated.npy", numpy_file(np.arange(4.0))[:-5])
    # 2^61 + 1 edges of 8 bytes: the byte count wraps to 8 in 64 bits.
    write(h, "bad-npy-shape-wraps-64-bits.npy",
          npy_by_hand("{'descr': '<f8', 'fortran_order': False, 'shape': (2305843009213693953,)}", b"\0" * 8))


if __name__ == "__main__":
    npy_corpus()
    raw_corpus()
    edges_corpus()
