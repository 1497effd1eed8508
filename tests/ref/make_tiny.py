#!/usr/bin/env python3
"""Write tiny random-weight GGUF models for forward-pass tests.

    python3 tests/ref/make_tiny.py OUTDIR [NAME ...]

Writes OUTDIR/<arch>-<variant>.gguf for arch in gemma3, llama, qwen2, qwen3 and
variant in f32, f16, q8_0, mix (mix = Q4_0, Q5_0, Q8_0, Q4_K, Q6_K weights
spread over the matrices, like a Q4_K_M file).  With NAME arguments only
those models are written.  Output is deterministic: the same bytes on every
run (fixed seeds, no timestamps).

Layout, metadata keys and tensor names follow what llama.cpp's
convert_hf_to_gguf.py writes for each architecture (see tests/ref/README.md):
  * 1-D tensors (norms, biases, rope_freqs) are always F32;
  * gemma3 norm weights are stored as (1 + w), as Gemma3Model.norm_shift does,
    so llama.cpp (and the reference) just multiply by the stored weight;
  * gemma3: attention.sliding_window, optional rope.freq_base_swa and
    final_logit_softcapping, 6 layers so that layer 5 is a global layer;
  * llama: vocab_size, rope.dimension_count, llama3-style rope_freqs.weight
    (computed as LlamaModel.generate_extra_tensors does) on some variants;
  * qwen2: q/k/v biases, no key_length (head size = n_embd / n_head);
  * qwen3: key_length != n_embd / n_head, attn_q_norm / attn_k_norm.
The tokenizer is a minimal SentencePiece ("llama") vocabulary: <pad>, <eos>,
<bos>, <unk>, (gemma3: <start_of_turn>, <end_of_turn>), the 256 byte tokens
<0x00>..<0xFF> and a few hundred normal pieces with scores.
"""
import math
import os
import sys

import numpy as np
import gguf
from gguf import GGMLQuantizationType as QT

QK_K = 256

# --------------------------------------------------------------------------
# K-quant encoders (gguf-py only decodes Q4_K / Q6_K).  Simple, not ggml's
# iterative search, but they produce valid blocks; the tests only need the
# encoded bytes to be decoded identically by ingot and the reference.
# --------------------------------------------------------------------------

def _f16(x):
    return np.asarray(x, dtype=np.float32).astype(np.float16)


def quantize_q4_k(x):
    """x: float32 [rows, k], k % 256 == 0 -> uint8 [rows, k/256*144]."""
    x = np.asarray(x, dtype=np.float32)
    rows, k = x.shape
    assert k % QK_K == 0
    b = x.reshape(-1, 8, 32)                              # super-block, sub-block, value
    nb = b.shape[0]
    mn = np.minimum(b.min(axis=2), 0.0)                   # value = scale*q - m, m = -min >= 0
    mx = b.max(axis=2)
    scale = (mx - mn) / 15.0
    m = -mn
    d = scale.max(axis=1) / 63.0
    dmin = m.max(axis=1) / 63.0
    d16, dmin16 = _f16(d), _f16(dmin)
    d32, dmin32 = d16.astype(np.float32), dmin16.astype(np.float32)
    with np.errstate(divide="ignore", invalid="ignore"):
        sc = np.where(d32[:, None] > 0, np.rint(scale / d32[:, None]), 0)
        mq = np.where(dmin32[:, None] > 0, np.rint(m / dmin32[:, None]), 0)
    sc = np.clip(sc, 0, 63).astype(np.uint8)
    mq = np.clip(mq, 0, 63).astype(np.uint8)
    eff_s = d32[:, None] * sc.astype(np.float32)
    eff_m = dmin32[:, None] * mq.astype(np.float32)
    with np.errstate(divide="ignore", invalid="ignore"):
        q = np.where(eff_s[:, :, None] > 0, np.rint((b + eff_m[:, :, None]) / eff_s[:, :, None]), 0)
    q = np.clip(q, 0, 15).astype(np.uint8)               # [nb, 8, 32]
    # scales: bytes 0-3 = sc[0..3] | hi2(sc[4..7])<<6, bytes 4-7 = m[0..3] | hi2(m[4..7])<<6,
    #         bytes 8-11 = lo4(sc[4..7]) | lo4(m[4..7])<<4
    scales = np.empty((nb, 12), dtype=np.uint8)
    scales[:, 0:4] = sc[:, 0:4] | ((sc[:, 4:8] >> 4) << 6)
    scales[:, 4:8] = mq[:, 0:4] | ((mq[:, 4:8] >> 4) << 6)
    scales[:, 8:12] = (sc[:, 4:8] & 0x0F) | ((mq[:, 4:8] & 0x0F) << 4)
    # qs: 4 chunks of 32 bytes; chunk c holds sub-block 2c (low nibble) and 2c+1 (high nibble)
    qs = (q[:, 0::2, :] | (q[:, 1::2, :] << 4)).reshape(nb, 128)
    out = np.concatenate([d16.view(np.uint8).reshape(nb, 2), dmin16.view(np.uint8).reshape(nb, 2),
                          scales, qs], axis=1)
    return out.reshape(rows, -1)


def quantize_q6_k(x):
    """x: float32 [rows, k], k % 256 == 0 -> uint8 [rows, k/256*210]."""
    x = np.asarray(x, dtype=np.float32)
    rows, k = x.shape
    assert k % QK_K == 0
    b = x.reshape(-1, 16, 16)
    nb = b.shape[0]
    s = np.abs(b).max(axis=2) / 31.0
    d = s.max(axis=1) / 127.0
    d16 = _f16(d)
    d32 = d16.astype(np.float32)
    with np.errstate(divide="ignore", invalid="ignore"):
        sc = np.where(d32[:, None] > 0, np.rint(s / d32[:, None]), 0)
    sc = np.clip(sc, -128, 127).astype(np.int8)
    eff = d32[:, None] * sc.astype(np.float32)
    with np.errstate(divide="ignore", invalid="ignore"):
        q = np.where(eff[:, :, None] > 0, np.rint(b / eff[:, :, None]), 0)
    q = (np.clip(q, -32, 31) + 32).astype(np.uint8).reshape(nb, 2, 128)   # [nb, half, r]
    lo, hi = q & 0x0F, q >> 4
    # value (half h, r): low 4 bits in ql[h*64 + r%64] nibble r//64, high 2 bits in qh[h*32 + r%32] bits 2*(r//32)
    ql = (lo[:, :, 0:64] | (lo[:, :, 64:128] << 4)).reshape(nb, 128)
    qh = (hi[:, :, 0:32] | (hi[:, :, 32:64] << 2) | (hi[:, :, 64:96] << 4) | (hi[:, :, 96:128] << 6)).reshape(nb, 64)
    out = np.concatenate([ql, qh, sc.view(np.uint8), d16.view(np.uint8).reshape(nb, 2)], axis=1)
    return out.reshape(rows, -1)


def encode(w, qtype):
    """Encode float32 [rows, cols] as qtype; returns the array to hand to GGUFWriter."""
    w = np.ascontiguousarray(w, dtype=np.float32)
    if qtype == QT.F32:
        return w
    if qtype == QT.F16:
        return w.astype(np.float16)
    if qtype == QT.Q4_K:
        return quantize_q4_k(w)
    if qtype == QT.Q6_K:
        return quantize_q6_k(w)
    return gguf.quants.quantize(w, qtype)


# --------------------------------------------------------------------------
# tokenizer
# --------------------------------------------------------------------------

WORDS = ("the of and to in is was that for on it with as his he by at be from this "
         "have not are but had they which one you were her all she there an been "
         "their has would when who will more no if out so said what up its about "
         "into than them can only other new some could time these two may then do "
         "first any my now such like our over man me even most made after also did "
         "Paris France capital city hello world").split()


def build_vocab(arch):
    """Returns tokens, scores, token types, and the special ids."""
    TT = gguf.TokenType
    tokens = ["<pad>", "<eos>", "<bos>", "<unk>"]
    types = [TT.CONTROL, TT.CONTROL, TT.CONTROL, TT.UNKNOWN]
    if arch == "gemma3":
        tokens += ["<start_of_turn>", "<end_of_turn>"]
        types += [TT.CONTROL, TT.CONTROL]
    scores = [0.0] * len(tokens)
    for i in range(256):
        tokens.append("<0x%02X>" % i)
        types.append(TT.BYTE)
        scores.append(0.0)
    pieces = ["\u2581"] + list("etaoinshrdlucmfwypvbgkqjxz") + list("ETAOINSHRDLUCMFWYPVBGKQJXZ") \
        + list("0123456789") + list(".,!?'\"-:;()")
    seen = set(pieces)
    for w in WORDS:  # every prefix, so SentencePiece merges can reach each word
        p = "\u2581" + w
        for n in range(2, len(p) + 1):
            if p[:n] not in seen:
                seen.add(p[:n])
                pieces.append(p[:n])
    for i, p in enumerate(pieces):
        tokens.append(p)
        types.append(TT.NORMAL)
        scores.append(-float(i))
    ids = dict(pad=0, eos=1, bos=2, unk=3)
    return tokens, scores, types, ids


# --------------------------------------------------------------------------
# model configurations
# --------------------------------------------------------------------------

ARCHS = ("gemma3", "llama", "qwen2", "qwen3")
VARIANTS = ("f32", "f16", "q8_0", "mix")

FILE_TYPE = {"f32": 0, "f16": 1, "q8_0": 7, "mix": 15}    # llama_ftype: ALL_F32, MOSTLY_F16, MOSTLY_Q8_0, MOSTLY_Q4_K_M
MIX_CYCLE = (QT.Q4_K, QT.Q5_0, QT.Q6_K, QT.Q4_0, QT.Q8_0)
MATRICES = ("attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down")


def config(arch, variant):
    big = variant == "mix"   # K-quants need rows that are a multiple of 256
    c = dict(arch=arch, variant=variant, n_embd=256 if big else 64, n_ctx=256, n_head=4,
             tied=True, rope_freqs=None, n_swa=0, freq_base_swa=None, softcap=None,
             qkv_bias=False, qk_norm=False, write_head_dim=True, rope_dim_key=False,
             vocab_size_key=False, gemma=False)
    if arch == "gemma3":
        # like gemma-3-270m: one KV head, head_dim != n_embd / n_head, 6 layers so layer 5 is global
        c.update(n_layer=6, n_head_kv=1, head_dim=64 if big else 32, n_ff=512 if big else 192,
                 eps=1e-6, freq_base=1e6, n_swa=8, qk_norm=True, gemma=True, n_ctx=512)
        # rope.freq_base_swa: absent in older files such as gemma-3-270m (llama.cpp then uses
        # 10000), 10000 from the current converter; f32 uses another value so that a loader
        # ignoring the key fails the tight F32 check.
        c["freq_base_swa"] = {"f32": 50000.0, "q8_0": 10000.0}.get(variant)
        if variant == "f16":
            c["softcap"] = 4.0                      # final_logit_softcapping (gemma2-style)
    elif arch == "llama":
        c.update(n_layer=3, n_head_kv=2, head_dim=64 if big else 16, n_ff=512 if big else 160,
                 eps=1e-5, freq_base=10000.0, rope_dim_key=True, vocab_size_key=True)
        if variant == "f32":                        # llama2 / TinyLlama style: no head_dim in config
            c.update(tied=False, write_head_dim=False)
        else:                                       # llama3 style rope scaling via rope_freqs
            c["rope_freqs"] = dict(factor=8.0, low_freq_factor=1.0, high_freq_factor=4.0,
                                   original_max_position_embeddings=64)
            c["freq_base"] = 10000.0 if variant != "mix" else 500000.0
            c["tied"] = variant == "f16"
    elif arch == "qwen2":
        c.update(n_layer=3, n_head_kv=2, head_dim=64 if big else 16, n_ff=512 if big else 160,
                 eps=1e-6, freq_base=1e6, qkv_bias=True, write_head_dim=False,
                 tied=variant in ("f32", "q8_0"))
    elif arch == "qwen3":
        c.update(n_layer=3, n_head_kv=2, head_dim=128 if big else 32, n_ff=512 if big else 192,
                 eps=1e-6, freq_base=1e6, qk_norm=True, tied=variant in ("f32", "mix"))
    else:
        raise ValueError(arch)
    return c


def weight_type(c, name, il):
    v = c["variant"]
    if v == "f32":
        return QT.F32
    if v == "f16":
        return QT.F16
    if v == "q8_0":
        return QT.Q8_0
    if name == "token_embd":
        return QT.Q8_0 if c["gemma"] else QT.Q4_K
    if name == "output":
        return QT.Q6_K
    return MIX_CYCLE[(MATRICES.index(name) + il) % len(MIX_CYCLE)]


def llama3_rope_factors(base, dim, p):
    # LlamaModel.generate_extra_tensors (convert_hf_to_gguf)
    freqs = 1.0 / (base ** (np.arange(0, dim, 2, dtype=np.float32) / dim))
    low_wl = p["original_max_position_embeddings"] / p["low_freq_factor"]
    high_wl = p["original_max_position_embeddings"] / p["high_freq_factor"]
    out = []
    for f in freqs:
        wl = 2 * math.pi / f
        if wl < high_wl:
            out.append(1.0)
        elif wl > low_wl:
            out.append(p["factor"])
        else:
            smooth = (p["original_max_position_embeddings"] / wl - p["low_freq_factor"]) / \
                     (p["high_freq_factor"] - p["low_freq_factor"])
            out.append(1.0 / ((1 - smooth) / p["factor"] + smooth))
    return np.array(out, dtype=np.float32)


def model_names():
    return [f"{a}-{v}" for a in ARCHS for v in VARIANTS]


def write_model(path, arch, variant):
    c = config(arch, variant)
    seed = 1000 + ARCHS.index(arch) * 10 + VARIANTS.index(variant)
    rng = np.random.default_rng(seed)
    tokens, scores, ttypes, ids = build_vocab(arch)
    n_vocab = len(tokens)
    E, H, KV, D, F = c["n_embd"], c["n_head"], c["n_head_kv"], c["head_dim"], c["n_ff"]

    def mat(rows, cols, scale=1.0):
        return (rng.standard_normal((rows, cols)) * (scale / math.sqrt(cols))).astype(np.float32)

    def normw(n):
        # RMSNorm weights near 1.  For gemma3 this is the stored value 1 + w of a
        # Gemma3RMSNorm weight w ~ 0 (the converter adds the 1, see module doc).
        return (1.0 + 0.15 * rng.standard_normal(n)).astype(np.float32)

    tensors = []   # (name, float32 array or None, qtype)

    def add(name, arr, qtype):
        tensors.append((name, arr, qtype))

    # rows of norm ~1, so tied logits are O(1) (gemma3 multiplies the lookup by sqrt(n_embd))
    emb = (rng.standard_normal((n_vocab, E)) / math.sqrt(E)).astype(np.float32)
    add("token_embd.weight", emb, weight_type(c, "token_embd", 0))
    add("output_norm.weight", normw(E), QT.F32)
    if not c["tied"]:
        add("output.weight", mat(n_vocab, E), weight_type(c, "output", 0))
    if c["rope_freqs"] is not None:
        add("rope_freqs.weight", llama3_rope_factors(c["freq_base"], D, c["rope_freqs"]), QT.F32)
    for il in range(c["n_layer"]):
        p = f"blk.{il}."
        add(p + "attn_norm.weight", normw(E), QT.F32)
        add(p + "attn_q.weight", mat(H * D, E), weight_type(c, "attn_q", il))
        add(p + "attn_k.weight", mat(KV * D, E), weight_type(c, "attn_k", il))
        add(p + "attn_v.weight", mat(KV * D, E), weight_type(c, "attn_v", il))
        if c["qkv_bias"]:
            add(p + "attn_q.bias", (0.3 * rng.standard_normal(H * D)).astype(np.float32), QT.F32)
            add(p + "attn_k.bias", (0.3 * rng.standard_normal(KV * D)).astype(np.float32), QT.F32)
            add(p + "attn_v.bias", (0.3 * rng.standard_normal(KV * D)).astype(np.float32), QT.F32)
        if c["qk_norm"]:
            add(p + "attn_q_norm.weight", normw(D), QT.F32)
            add(p + "attn_k_norm.weight", normw(D), QT.F32)
        add(p + "attn_output.weight", mat(E, H * D), weight_type(c, "attn_output", il))
        if c["gemma"]:
            add(p + "post_attention_norm.weight", normw(E), QT.F32)
        add(p + "ffn_norm.weight", normw(E), QT.F32)
        add(p + "ffn_gate.weight", mat(F, E), weight_type(c, "ffn_gate", il))
        add(p + "ffn_up.weight", mat(F, E), weight_type(c, "ffn_up", il))
        add(p + "ffn_down.weight", mat(E, F), weight_type(c, "ffn_down", il))
        if c["gemma"]:
            add(p + "post_ffw_norm.weight", normw(E), QT.F32)

    # every name must be one llama.cpp knows for this architecture
    march = {"gemma3": gguf.MODEL_ARCH.GEMMA3, "llama": gguf.MODEL_ARCH.LLAMA,
             "qwen2": gguf.MODEL_ARCH.QWEN2, "qwen3": gguf.MODEL_ARCH.QWEN3}[arch]
    known = set()
    for t in gguf.MODEL_TENSORS[march]:
        base = gguf.TENSOR_NAMES[t]
        for il in range(c["n_layer"]):
            known.add(base.format(bid=il))
    for name, _, _ in tensors:
        assert name.rsplit(".", 1)[0] in known, f"{arch}: unknown tensor {name}"

    w = gguf.GGUFWriter(path, arch)
    w.add_name(f"ingot tiny {arch} {variant}")
    w.add_context_length(c["n_ctx"])
    w.add_embedding_length(E)
    w.add_block_count(c["n_layer"])
    w.add_feed_forward_length(F)
    w.add_head_count(H)
    w.add_head_count_kv(KV)
    if c["write_head_dim"]:
        w.add_key_length(D)
        w.add_value_length(D)
    else:
        assert D == E // H
    w.add_rope_freq_base(c["freq_base"])
    if c["freq_base_swa"] is not None:
        w.add_rope_freq_base_swa(c["freq_base_swa"])
    w.add_layer_norm_rms_eps(c["eps"])
    if c["n_swa"]:
        w.add_sliding_window(c["n_swa"])
    if c["softcap"] is not None:
        w.add_final_logit_softcapping(c["softcap"])
    if c["vocab_size_key"]:
        w.add_vocab_size(n_vocab)
    if c["rope_dim_key"]:
        w.add_rope_dimension_count(D)
    w.add_file_type(FILE_TYPE[variant])
    if variant in ("q8_0", "mix"):
        w.add_quantization_version(gguf.GGML_QUANT_VERSION)

    w.add_tokenizer_model("llama")
    w.add_tokenizer_pre("default")
    w.add_token_list(tokens)
    w.add_token_scores(scores)
    w.add_token_types([int(t) for t in ttypes])
    w.add_bos_token_id(ids["bos"])
    w.add_eos_token_id(ids["eos"])
    w.add_unk_token_id(ids["unk"])
    w.add_pad_token_id(ids["pad"])
    w.add_add_bos_token(True)
    w.add_add_eos_token(False)
    if c["gemma"]:
        w.add_add_space_prefix(False)

    for name, arr, qtype in tensors:
        data = encode(arr if arr.ndim == 2 else arr.reshape(1, -1), qtype)
        if arr.ndim == 1:
            data = data.reshape(-1)
        w.add_tensor(name, data, raw_dtype=None if qtype in (QT.F32, QT.F16) else qtype)

    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def main(argv):
    if len(argv) < 2:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    out = argv[1]
    names = argv[2:] or model_names()
    os.makedirs(out, exist_ok=True)
    for n in names:
        arch, variant = n.split("-", 1)
        path = os.path.join(out, n + ".gguf")
        tmp = path + ".tmp"
        write_model(tmp, arch, variant)
        os.replace(tmp, path)
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
