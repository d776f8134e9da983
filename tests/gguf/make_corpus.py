#!/usr/bin/env python3
"""Writes tests/gguf/corpus/: small malformed GGUF files (*.bin: the repository
ignores *.gguf, which are generated models) derived from one valid
tiny file, plus expect.tsv (file name -> a substring the error must contain).
Every file must make gguf::File::parse (or, for tok_* files, the tokenizer
loader) throw FormatError; test_gguf_corpus.cpp checks that under ASan, and the
fuzzer starts from these files. Run from anywhere: python3 make_corpus.py"""
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "corpus")

U8, I8, U16, I16, U32, I32, F32, BOOL, STRING, ARRAY, U64, I64, F64 = range(13)
F32T, F16T, Q4_0, Q8_0 = 0, 1, 2, 8


def s(b):
    b = b.encode() if isinstance(b, str) else b
    return struct.pack("<Q", len(b)) + b


def val(t, v):
    if t == STRING:
        return s(v)
    if t == ARRAY:
        et, items = v
        return struct.pack("<IQ", et, len(items)) + b"".join(val(et, x) for x in items)
    fmt = {U8: "B", I8: "b", U16: "H", I16: "h", U32: "I", I32: "i", F32: "f", BOOL: "B",
           U64: "Q", I64: "q", F64: "d"}[t]
    return struct.pack("<" + fmt, v)


def kv(key, t, v):
    return s(key) + struct.pack("<I", t) + val(t, v)


def tinfo(name, dims, typ, off):
    return s(name) + struct.pack("<I", len(dims)) + b"".join(struct.pack("<Q", d) for d in dims) + \
        struct.pack("<IQ", typ, off)


def gguf(kvs, infos, data, version=3, n_tensors=None, n_kv=None, align=32, magic=b"GGUF"):
    head = magic + struct.pack("<IQQ", version, len(infos) if n_tensors is None else n_tensors,
                               len(kvs) if n_kv is None else n_kv)
    body = head + b"".join(kvs) + b"".join(infos)
    pad = (-len(body)) % align
    return body + b"\0" * pad + data


TOKENS = ["<unk>", "<s>", "</s>", "\u2581a", "a", "b"]


def base_kvs():
    return [
        kv("general.architecture", STRING, "llama"),
        kv("llama.block_count", U32, 1),
        kv("general.alignment", U32, 32),
        kv("tokenizer.ggml.model", STRING, "llama"),
        kv("tokenizer.ggml.tokens", ARRAY, (STRING, TOKENS)),
        kv("tokenizer.ggml.scores", ARRAY, (F32, [0.0] * len(TOKENS))),
        kv("tokenizer.ggml.token_type", ARRAY, (I32, [2, 3, 3, 1, 1, 1])),
        kv("tokenizer.ggml.add_bos_token", BOOL, 1),
    ]


# t0: f32 [4, 2] = 32 bytes at 0; t1: q8_0 [32] = 34 bytes at 32; t2: q4_0 [32] = 18 bytes at 96.
def base_infos(t1_type=Q8_0):
    return [tinfo("t0", [4, 2], F32T, 0), tinfo("t1", [32], t1_type, 32), tinfo("t2", [32], Q4_0, 96)]


DATA = bytes(range(32)) + bytes(34) + b"\x11" * 30 + bytes(18)  # ends exactly at t2's end


def valid():
    return gguf(base_kvs(), base_infos(), DATA)


def main():
    os.makedirs(OUT, exist_ok=True)
    for f in os.listdir(OUT):
        os.remove(os.path.join(OUT, f))
    cases = {}  # name -> (bytes, expected substring)

    def add(name, data, expect):
        cases[name] = (data, expect)

    v = valid()
    with open(os.path.join(HERE, "valid_tiny.bin"), "wb") as fh:
        fh.write(v)
    # A gpt2 (byte-level BPE, llama3 pre-tokenizer) twin, to seed the fuzzer on the BPE path.
    bpe_kvs = [k for k in base_kvs() if not k[8:].startswith(b"tokenizer.")] + [
        kv("tokenizer.ggml.model", STRING, "gpt2"),
        kv("tokenizer.ggml.pre", STRING, "llama3"),
        kv("tokenizer.ggml.tokens", ARRAY, (STRING, ["a", "b", "\u0120", "ab", "\u0120a", "<|eot_id|>"])),
        kv("tokenizer.ggml.token_type", ARRAY, (I32, [1, 1, 1, 1, 1, 3])),
        kv("tokenizer.ggml.merges", ARRAY, (STRING, ["a b", "\u0120 a"])),
        kv("tokenizer.ggml.bos_token_id", U32, 5),
    ]
    with open(os.path.join(HERE, "valid_tiny_gpt2.bin"), "wb") as fh:
        fh.write(gguf(bpe_kvs, base_infos(), DATA))
    # Every cut ends inside a field or before t2's data ends, so all must fail.
    # All cuts in the header, then every 4th byte (each field is still cut somewhere).
    for cut in list(range(0, 64)) + list(range(64, len(v), 4)) + [len(v) - 1]:
        add(f"trunc_{cut:04d}.bin", v[:cut], "at byte")

    add("magic_ggml.bin", b"ggjt" + v[4:], "not a GGUF file")
    add("version_1.bin", v[:4] + struct.pack("<I", 1) + v[8:], "version 1 is not supported")
    add("version_4.bin", v[:4] + struct.pack("<I", 4) + v[8:], "unsupported GGUF version 4")
    add("version_big_endian.bin", v[:4] + struct.pack(">I", 3) + v[8:], "big-endian")
    add("huge_tensor_count.bin", gguf(base_kvs(), base_infos(), DATA, n_tensors=1 << 62), "tensor count")
    add("huge_kv_count.bin", gguf(base_kvs(), base_infos(), DATA, n_kv=(1 << 64) - 1), "key/value count")
    add("kv_count_too_high.bin", gguf(base_kvs(), base_infos(), DATA, n_kv=9), "at byte")
    add("huge_key_len.bin", gguf([struct.pack("<Q", 1 << 60) + b"x"] + base_kvs(), base_infos(), DATA),
        "string length")
    add("huge_string_value.bin",
        gguf([s("k") + struct.pack("<IQ", STRING, (1 << 64) - 2)] + base_kvs(), base_infos(), DATA),
        "string length")
    add("huge_array_count.bin",
        gguf([s("k") + struct.pack("<IIQ", ARRAY, U64, 1 << 61)] + base_kvs(), base_infos(), DATA),
        "array length")
    add("huge_string_array.bin",
        gguf([s("k") + struct.pack("<IIQ", ARRAY, STRING, 1 << 40)] + base_kvs(), base_infos(), DATA),
        "array length")
    add("bad_value_type.bin", gguf([s("k") + struct.pack("<II", 13, 0)] + base_kvs(), base_infos(), DATA),
        "value type 13")
    add("bad_value_type_ffff.bin",
        gguf([s("k") + struct.pack("<II", 0xFFFFFFFF, 0)] + base_kvs(), base_infos(), DATA),
        "not a GGUF value type")
    add("bad_array_elem_type.bin",
        gguf([s("k") + struct.pack("<IIQ", ARRAY, 77, 1)] + base_kvs(), base_infos(), DATA),
        "array element type 77")
    add("bad_bool.bin", gguf([s("k") + struct.pack("<IB", BOOL, 2)] + base_kvs(), base_infos(), DATA),
        "must be 0 or 1")
    nested = struct.pack("<I", ARRAY)
    for _ in range(6):
        nested += struct.pack("<IQ", ARRAY, 1)
    nested += struct.pack("<IQ", U8, 0)
    add("deep_nested_array.bin", gguf([s("k") + nested] + base_kvs(), base_infos(), DATA), "nested deeper")
    add("duplicate_key.bin", gguf(base_kvs() + [kv("llama.block_count", U32, 2)], base_infos(), DATA),
        "duplicate key")
    add("empty_key.bin", gguf([kv("", U32, 2)] + base_kvs(), base_infos(), DATA), "empty key")

    def with_align(t, a):
        kvs = [k for k in base_kvs() if b"general.alignment" not in k]
        return gguf(kvs + [kv("general.alignment", t, a)], base_infos(), DATA)

    add("align_zero.bin", with_align(U32, 0), "power of two")
    add("align_three.bin", with_align(U32, 3), "power of two")
    add("align_48.bin", with_align(U32, 48), "power of two")
    add("align_huge.bin", with_align(U64, 1 << 40), "power of two")
    add("align_string.bin", with_align(STRING, "32"), "general.alignment")
    add("align_float.bin", with_align(F32, 32.0), "general.alignment")

    def with_infos(infos, data=DATA):
        return gguf(base_kvs(), infos, data)

    t0, t1, t2 = base_infos()
    add("tensor_ndims_0.bin", with_infos([tinfo("t0", [], F32T, 0), t1, t2]), "n_dims is 0")
    add("tensor_ndims_5.bin", with_infos([tinfo("t0", [4, 2, 1, 1, 1], F32T, 0), t1, t2]), "n_dims is 5")
    add("tensor_ndims_huge.bin",
        with_infos([s("t0") + struct.pack("<I", 0xFFFFFFFF) + struct.pack("<Q", 4), t1, t2]), "n_dims")
    add("tensor_dim_zero.bin", with_infos([tinfo("t0", [4, 0], F32T, 0), t1, t2]), "must be > 0")
    add("tensor_dim_negative.bin", with_infos([tinfo("t0", [4, (1 << 64) - 2], F32T, 0), t1, t2]),
        "must be > 0")
    add("tensor_dims_overflow.bin", with_infos([tinfo("t0", [1 << 40, 1 << 40], F32T, 0), t1, t2]),
        "overflows")
    add("tensor_size_overflow.bin", with_infos([tinfo("t0", [1 << 61, 2], F32T, 0), t1, t2]),
        "overflows")
    add("tensor_type_q4_1.bin", with_infos(base_infos(t1_type=3)), "tensor 't1' (#1)")
    add("tensor_type_99.bin", with_infos(base_infos(t1_type=99)), "unknown (99)")
    add("tensor_type_q8_k.bin", with_infos(base_infos(t1_type=15)), "q8_k (15)")
    add("tensor_row_not_block_multiple.bin", with_infos([t0, tinfo("t1", [31], Q8_0, 32), t2]),
        "not a multiple of the q8_0 block size")
    add("tensor_offset_unaligned.bin", with_infos([t0, tinfo("t1", [32], Q8_0, 33), t2]),
        "not a multiple of the alignment")
    add("tensor_offset_past_eof.bin", with_infos([t0, tinfo("t1", [32], Q8_0, 1 << 20), t2]),
        "past end of file")
    add("tensor_offset_wraps.bin", with_infos([t0, tinfo("t1", [32], Q8_0, (1 << 64) - 32), t2]),
        "past end of file")
    add("tensor_data_past_eof.bin", with_infos([t0, t1, tinfo("t2", [64], Q4_0, 96)]),
        "ends past end of file")
    add("tensor_huge_data_past_eof.bin", with_infos([t0, t1, tinfo("t2", [1 << 40, 1 << 10], Q4_0, 96)]),
        "ends past end of file")
    add("tensor_overlap.bin", with_infos([t0, tinfo("t1", [32], Q8_0, 0), t2]), "overlaps")
    add("tensor_overlap_partial.bin", with_infos([tinfo("t0", [12, 1], F32T, 0), t1, t2]), "overlaps")
    add("tensor_duplicate_name.bin", with_infos([t0, tinfo("t0", [32], Q8_0, 32), t2]),
        "duplicate tensor name")
    add("tensor_empty_name.bin", with_infos([t0, tinfo("", [32], Q8_0, 32), t2]), "empty tensor name")
    add("tensor_long_name.bin", with_infos([t0, tinfo("x" * 65, [32], Q8_0, 32), t2]), "bytes long")
    add("tensor_name_huge_len.bin", with_infos([t0, struct.pack("<Q", 1 << 50) + b"t1"]), "string length")
    add("empty.bin", b"", "at byte 0")
    add("three_bytes.bin", b"GGU", "at byte 0")

    # Well-formed GGUF, malformed tokenizer metadata: the tokenizer loader must refuse.
    def tok(kvs_replace, drop=()):
        kvs = base_kvs()
        keys = [k for k, _, _ in kvs_replace]
        out = [x for x in kvs if not any(s(key) in x[: len(key) + 8] for key in keys + list(drop))]
        out += [kv(k, t, v) for k, t, v in kvs_replace]
        return gguf(out, base_infos(), DATA)

    add("tok_model_unknown.bin", tok([("tokenizer.ggml.model", STRING, "bert")]), "'bert' is not supported")
    add("tok_model_not_string.bin", tok([("tokenizer.ggml.model", U32, 1)]), "expected a string")
    add("tok_no_tokens.bin", tok([], drop=["tokenizer.ggml.tokens"]), "tokenizer.ggml.tokens")
    add("tok_tokens_not_strings.bin", tok([("tokenizer.ggml.tokens", ARRAY, (U32, [1, 2, 3, 4, 5, 6]))]),
        "tokenizer.ggml.tokens")
    add("tok_scores_short.bin", tok([("tokenizer.ggml.scores", ARRAY, (F32, [0.0] * 5))]), "has 5 entries")
    add("tok_types_bad.bin", tok([("tokenizer.ggml.token_type", ARRAY, (I32, [2, 3, 3, 1, 9, 1]))]),
        "type 9")
    add("tok_bos_out_of_range.bin", tok([("tokenizer.ggml.bos_token_id", U32, 6)]), "outside the vocabulary")
    add("tok_gpt2_no_merges.bin", tok([("tokenizer.ggml.model", STRING, "gpt2")]), "merges")
    add("tok_gpt2_bad_merge.bin", tok([("tokenizer.ggml.model", STRING, "gpt2"),
                                         ("tokenizer.ggml.merges", ARRAY, (STRING, ["a b", "ab"]))]),
        "merge #1")
    add("tok_gpt2_bad_pre.bin", tok([("tokenizer.ggml.model", STRING, "gpt2"),
                                       ("tokenizer.ggml.pre", STRING, "nope"),
                                       ("tokenizer.ggml.merges", ARRAY, (STRING, ["a b"]))]),
        "'nope' is not supported")

    with open(os.path.join(OUT, "expect.tsv"), "w") as fh:
        for name in sorted(cases):
            data, expect = cases[name]
            with open(os.path.join(OUT, name), "wb") as g:
                g.write(data)
            fh.write(f"{name}\t{expect}\n")
    print(f"wrote {len(cases)} files to {OUT}")


if __name__ == "__main__":
    main()
