#!/usr/bin/env python3
"""Independent NumPy reference of the llama.cpp forward pass.

    logits(model_path, token_ids) -> np.ndarray [n_tokens, n_vocab] (float64)

    python3 tests/ref/forward_ref.py MODEL.gguf ID [ID ...]   # prints top-5 per position

Supported architectures: gemma3, llama, qwen2, qwen3 (see tests/ref/README.md
for the llama.cpp code each step follows).  Every tensor is dequantized with
gguf.quants.dequantize; all arithmetic is float64 (dtype=np.float32 runs the
same steps in float32, to see what float32 rounding alone does).  Token ids
are at positions 0, 1, 2, ... of a single sequence (one prompt evaluated from
an empty cache).  trace=fn(name, array) sees the intermediate results, named
like llama.cpp's graph callbacks (attn_norm-0, Qcur-0, ..., result_norm).

Activation quantization (act_quant=True, the default): llama.cpp's CPU backend
converts the activation row to the weight's "vec_dot_type" before every matrix
multiplication with a quantized or F16 weight, and so does ingot.  The
reference does the same, in float32 like ggml, then dequantizes it again and
dots in float64:
    Q4_0 Q4_1 Q5_0 Q5_1 Q8_0      -> Q8_0 (32-blocks, fp16 scale, rint(x*127/amax))
    Q2_K .. Q6_K                  -> Q8_K (256-blocks, fp32 scale, ggml's
                                     quantize_row_q8_K_ref)
    F16 / BF16                    -> rounded to F16 / BF16
    F32                           -> unchanged
Embedding lookups (get_rows) are not quantized.  act_quant=False gives the
plain float64 result with only the weights quantized.

gelu_f16_table=True additionally imitates ggml-cpu's GELU, which looks gelu up
in a table indexed by the fp16-rounded input (GGML_GELU_FP16); off by default,
the reference uses the exact tanh-approximation formula.
"""
import math
import sys

import numpy as np
import gguf
from gguf import GGMLQuantizationType as QT

Q8_0_FAMILY = {QT.Q4_0, QT.Q4_1, QT.Q5_0, QT.Q5_1, QT.Q8_0}
Q8_K_FAMILY = {QT.Q2_K, QT.Q3_K, QT.Q4_K, QT.Q5_K, QT.Q6_K}

# llama.cpp llama_model_rope_type(): llama = NORM (adjacent pairs), the others NEOX (halves)
ROPE_NEOX = {"llama": False, "qwen2": True, "qwen3": True, "gemma3": True}


# --------------------------------------------------------------------------
# activation quantization (what ggml does to src1 of mul_mat)
# --------------------------------------------------------------------------

def _roundf(a):
    # C roundf: halves away from zero
    return np.sign(a) * np.floor(np.abs(a) + np.float32(0.5))


def act_q8_0(x):
    """quantize_row_q8_0 (x86 kernel semantics) then dequantize. x: [n, k] float, k % 32 == 0."""
    x = np.asarray(x, dtype=np.float32)
    n, k = x.shape
    b = x.reshape(n, k // 32, 32)
    amax = np.abs(b).max(axis=2, keepdims=True)
    d = (amax / np.float32(127)).astype(np.float32)
    # llama.cpp's x86 run-time quantizer (and ingot's): id = 127/amax, ties to even
    with np.errstate(divide="ignore"):
        idv = np.where(amax != 0, np.float32(127) / amax, np.float32(0)).astype(np.float32)
    q = np.rint((b * idv).astype(np.float32))
    d16 = d.astype(np.float16).astype(np.float64)
    return (q.astype(np.float64) * d16).reshape(n, k)


def act_q8_k(x):
    """quantize_row_q8_K_ref then dequantize. x: [n, k] float, k % 256 == 0."""
    x = np.asarray(x, dtype=np.float32)
    n, k = x.shape
    b = x.reshape(n, k // 256, 256)
    idx = np.abs(b).argmax(axis=2)[..., None]            # first index of the largest |x|
    mx = np.take_along_axis(b, idx, axis=2)              # the signed value with the largest |x|
    safe = np.where(mx != 0, mx, np.float32(1)).astype(np.float32)
    iscale = (np.float32(-127) / safe).astype(np.float32)
    v = np.rint((iscale * b).astype(np.float32))         # nearest_int(): round half to even
    q = np.minimum(np.float32(127), v)
    d = (np.float32(1) / iscale).astype(np.float32)
    out = np.where(mx != 0, q.astype(np.float64) * d.astype(np.float64), 0.0)
    return out.reshape(n, k)


def act_convert(x, qtype):
    if qtype in Q8_0_FAMILY:
        return act_q8_0(x)
    if qtype in Q8_K_FAMILY:
        return act_q8_k(x)
    if qtype == QT.F16:
        return np.asarray(x, dtype=np.float32).astype(np.float16).astype(np.float64)
    if qtype == QT.BF16:
        u = np.asarray(x, dtype=np.float32).view(np.uint32)
        u = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16) << 16     # round to nearest even, like ggml
        return u.astype(np.uint32).view(np.float32).astype(np.float64)
    if qtype == QT.F32:
        return np.asarray(x, dtype=np.float64)
    raise NotImplementedError(f"activation conversion for {qtype.name}")


# --------------------------------------------------------------------------
# model loading
# --------------------------------------------------------------------------

class Weight:
    def __init__(self, t):
        self.name = t.name
        self.qtype = QT(t.tensor_type)
        self.ne = [int(v) for v in t.shape]               # ggml order: ne[0] = row length
        self._raw = t.data
        self._w = {}

    def get(self, dtype=np.float64):
        """Dequantized array [prod(ne[1:]), ne[0]] (1-D tensors: [ne[0]])."""
        dtype = np.dtype(dtype)
        if dtype not in self._w:
            a = gguf.quants.dequantize(self._raw, self.qtype)     # exact in float32
            a = a.reshape(self.ne[0]) if len(self.ne) == 1 else a.reshape(-1, self.ne[0])
            self._w[dtype] = a.astype(dtype)
        return self._w[dtype]

    @property
    def w(self):
        return self.get(np.float64)


class Model:
    def __init__(self, path):
        r = gguf.GGUFReader(path)
        self.kv = {}
        for k, f in r.fields.items():
            if k.startswith("tokenizer.ggml.") and k not in (
                    "tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id"):
                continue
            self.kv[k] = f.contents()
        self.tensors = {t.name: Weight(t) for t in r.tensors}
        self.arch = self.kv["general.architecture"]
        if self.arch not in ROPE_NEOX:
            raise NotImplementedError(f"architecture {self.arch}")
        a = self.arch
        g = lambda key, default=None: self.kv.get(f"{a}.{key}", default)
        self.n_embd = int(g("embedding_length"))
        self.n_layer = int(g("block_count"))
        self.n_head = int(g("attention.head_count"))
        self.n_head_kv = int(g("attention.head_count_kv", self.n_head))
        self.head_k = int(g("attention.key_length", self.n_embd // self.n_head))
        self.head_v = int(g("attention.value_length", self.n_embd // self.n_head))
        self.n_rot = int(g("rope.dimension_count", self.head_k))
        self.eps = float(g("attention.layer_norm_rms_epsilon"))
        self.freq_base = float(g("rope.freq_base", 10000.0))
        # llama_model::load_hparams: rope.scaling.type defaults to "linear", factor to 0 (= no scaling)
        stype = g("rope.scaling.type", "linear")
        factor = float(g("rope.scaling.factor", g("rope.scale_linear", 0.0)))
        if stype not in ("linear", "none"):
            raise NotImplementedError(f"rope scaling type {stype}")
        self.freq_scale = 1.0 if (stype == "none" or factor == 0.0) else 1.0 / factor
        self.rope_neox = ROPE_NEOX[a]
        self.rope_freqs = None
        if a == "llama" and "rope_freqs.weight" in self.tensors:   # llama3: get_rope_factors()
            self.rope_freqs = self.tensors["rope_freqs.weight"].w[: self.n_rot // 2]
        self.n_vocab = self.tensors["token_embd.weight"].ne[1]

        # per-layer attention setup
        self.is_swa = [False] * self.n_layer
        self.n_swa = 0
        self.freq_base_swa = 10000.0          # llama_hparams default rope_freq_base_train_swa
        self.softcap = 0.0
        self.kq_scale = 1.0 / math.sqrt(self.head_k)
        if a == "gemma3":
            self.n_swa = int(g("attention.sliding_window", 0))
            if self.n_swa > 0:
                pat = g("attention.sliding_window_pattern", 6)
                if isinstance(pat, list):
                    self.is_swa = [bool(v) for v in pat]
                else:   # set_swa_pattern(n, dense_first=false): every n-th layer is global
                    pat = int(pat)
                    self.is_swa = [pat == 0 or (il % pat < pat - 1) for il in range(self.n_layer)]
                self.freq_base_swa = float(g("rope.freq_base_swa", 10000.0))
            self.softcap = float(g("final_logit_softcapping", 0.0))
            # llama_model_gemma3::load_arch_hparams: 27B (62 layers) scales by n_embd/n_head
            if self.n_layer == 62:
                self.kq_scale = 1.0 / math.sqrt(self.n_embd // self.n_head)

    def t(self, name):
        return self.tensors.get(name)


# --------------------------------------------------------------------------
# ops
# --------------------------------------------------------------------------

class Ctx:
    def __init__(self, m, act_quant, gelu_f16_table, dtype):
        self.m = m
        self.act_quant = act_quant
        self.gelu_f16_table = gelu_f16_table
        self.dt = np.dtype(dtype)

    def c(self, a):
        return np.asarray(a, dtype=self.dt)

    def mm(self, wt, x, bias=None):
        """ggml_mul_mat(W, x): x [n, k] -> [n, rows]."""
        xin = self.c(act_convert(x, wt.qtype)) if self.act_quant else x
        y = xin @ wt.get(self.dt).T
        if bias is not None:
            y = y + bias.get(self.dt)
        return y

    def rms_norm(self, x, wt):
        # ggml_rms_norm(eps) then ggml_mul(weight); over the last axis
        y = x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + self.c(self.m.eps))
        return y * wt.get(self.dt)

    def gelu(self, x):
        def f(v):
            return 0.5 * v * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * v * (1.0 + 0.044715 * v * v)))
        if not self.gelu_f16_table:
            return self.c(f(x))
        h = x.astype(np.float32).astype(np.float16).astype(np.float64)
        t = f(h).astype(np.float32).astype(np.float16)
        return self.c(np.where(x <= -10.0, 0.0, np.where(x >= 10.0, x, t)))

    def rope(self, x, pos, base, scale, freqs):
        """ggml_rope_ext on x [n_tok, n_heads, head_dim]; pos [n_tok]."""
        n_rot = self.m.n_rot
        i = np.arange(n_rot // 2, dtype=np.float64)
        theta = base ** (-2.0 * i / n_rot)                   # theta_scale^i
        if freqs is not None:
            theta = theta / freqs
        ang = scale * pos[:, None].astype(np.float64) * theta[None, :]   # [n_tok, n_rot/2]
        c = self.c(np.cos(ang))[:, None, :]
        s = self.c(np.sin(ang))[:, None, :]
        out = x.copy()
        if self.m.rope_neox:     # pairs (j, j + n_rot/2)
            x0 = x[:, :, : n_rot // 2]
            x1 = x[:, :, n_rot // 2 : n_rot]
            out[:, :, : n_rot // 2] = x0 * c - x1 * s
            out[:, :, n_rot // 2 : n_rot] = x0 * s + x1 * c
        else:                    # pairs (2j, 2j + 1)
            x0 = x[:, :, 0:n_rot:2]
            x1 = x[:, :, 1:n_rot:2]
            out[:, :, 0:n_rot:2] = x0 * c - x1 * s
            out[:, :, 1:n_rot:2] = x0 * s + x1 * c
        return out

    def attention(self, q, k, v, pos, kq_scale, swa):
        """q [n, H, Dk], k [n, KV, Dk], v [n, KV, Dv] -> [n, H*Dv]; causal (+ sliding window)."""
        m = self.m
        n = q.shape[0]
        group = m.n_head // m.n_head_kv
        p_q = pos[:, None]
        p_k = pos[None, :]
        allowed = p_k <= p_q
        if swa:
            allowed &= ~(p_q - p_k >= m.n_swa)           # llama_hparams::is_masked_swa (STANDARD)
        out = np.empty((n, m.n_head, m.head_v), dtype=self.dt)
        for h in range(m.n_head):
            kh = h // group                              # ggml_mul_mat broadcast of K/V over heads
            s = (q[:, h, :] @ k[:, kh, :].T) * self.c(kq_scale)
            s = np.where(allowed, s, self.c(-np.inf))
            s = s - s.max(axis=1, keepdims=True)
            p = np.exp(s)
            p /= p.sum(axis=1, keepdims=True)
            out[:, h, :] = p @ v[:, kh, :]
        return out.reshape(n, m.n_head * m.head_v)


def _forward(m, ids, act_quant=True, gelu_f16_table=False, trace=None, dtype=np.float64):
    cx = Ctx(m, act_quant, gelu_f16_table, dtype)
    cb = trace or (lambda name, arr: None)
    ids = np.asarray(ids, dtype=np.int64)
    if ids.ndim != 1 or len(ids) == 0:
        raise ValueError("token_ids must be a non-empty 1-D list")
    if ids.min() < 0 or ids.max() >= m.n_vocab:
        raise ValueError("token id out of range")
    n = len(ids)
    pos = np.arange(n)
    gemma = m.arch == "gemma3"
    H, KV, Dk, Dv = m.n_head, m.n_head_kv, m.head_k, m.head_v

    x = m.t("token_embd.weight").get(cx.dt)[ids]          # ggml_get_rows: no activation quantization
    if gemma:
        x = x * cx.c(np.float32(math.sqrt(m.n_embd)))     # sqrtf(n_embd)
    cb("inp_embd", x)

    for il in range(m.n_layer):
        L = lambda name: m.t(f"blk.{il}.{name}")
        if m.t(f"blk.{il}.attn_qkv.weight") is not None:
            raise NotImplementedError("fused attn_qkv")
        swa = m.is_swa[il]
        if swa:
            base, scale = m.freq_base_swa, 1.0            # rope_freq_{base,scale}_train_swa
        else:
            base, scale = m.freq_base, m.freq_scale

        h = cx.rms_norm(x, L("attn_norm.weight"))
        cb(f"attn_norm-{il}", h)
        q = cx.mm(L("attn_q.weight"), h, L("attn_q.bias")).reshape(n, H, Dk)
        k = cx.mm(L("attn_k.weight"), h, L("attn_k.bias")).reshape(n, KV, Dk)
        v = cx.mm(L("attn_v.weight"), h, L("attn_v.bias")).reshape(n, KV, Dv)
        if L("attn_q_norm.weight") is not None:           # qwen3, gemma3: per-head RMSNorm before RoPE
            q = cx.rms_norm(q, L("attn_q_norm.weight"))
            k = cx.rms_norm(k, L("attn_k_norm.weight"))
        q = cx.rope(q, pos, base, scale, m.rope_freqs)
        k = cx.rope(k, pos, base, scale, m.rope_freqs)
        cb(f"Qcur-{il}", q)
        cb(f"Kcur-{il}", k)
        cb(f"Vcur-{il}", v)
        a = cx.attention(q, k, v, pos, m.kq_scale, swa)
        cb(f"kqv_out-{il}", a)
        # attn_output.bias exists only for llama (optional); the others never load one
        o = cx.mm(L("attn_output.weight"), a, L("attn_output.bias"))

        if gemma:
            o = cx.rms_norm(o, L("post_attention_norm.weight"))
            sa = x + o
            h = cx.rms_norm(sa, L("ffn_norm.weight"))
            gate = cx.mm(L("ffn_gate.weight"), h)
            up = cx.mm(L("ffn_up.weight"), h)
            act = cx.gelu(gate) * up                                   # LLM_FFN_GELU, LLM_FFN_PAR
            f = cx.mm(L("ffn_down.weight"), act)
            cb(f"attn_post_norm-{il}", o)
            cb(f"sa_out-{il}", sa)
            cb(f"ffn_norm-{il}", h)
            cb(f"ffn_gate-{il}", gate)
            cb(f"ffn_up-{il}", up)
            cb(f"ffn_geglu-{il}", act)
            f = cx.rms_norm(f, L("post_ffw_norm.weight"))
            x = sa + f
            cb(f"ffn_out-{il}", f)
        else:
            ffn_inp = x + o
            h = cx.rms_norm(ffn_inp, L("ffn_norm.weight"))
            gate = cx.mm(L("ffn_gate.weight"), h, L("ffn_gate.bias"))
            up = cx.mm(L("ffn_up.weight"), h, L("ffn_up.bias"))
            act = gate / (1 + np.exp(-gate)) * up                      # LLM_FFN_SILU, LLM_FFN_PAR
            f = cx.mm(L("ffn_down.weight"), act, L("ffn_down.bias"))
            cb(f"ffn_norm-{il}", h)
            cb(f"ffn_gate-{il}", gate)
            cb(f"ffn_up-{il}", up)
            cb(f"ffn_swiglu-{il}", act)
            x = ffn_inp + f
            cb(f"ffn_inp-{il}", ffn_inp)
            cb(f"ffn_out-{il}", f)

        cb(f"l_out-{il}", x)

    h = cx.rms_norm(x, m.t("output_norm.weight"))
    cb("result_norm", h)
    out_w = m.t("output.weight") or m.t("token_embd.weight")       # tied when output.weight is absent
    logits = cx.mm(out_w, h, m.t("output.bias"))                   # output.bias: qwen2 only
    if m.softcap:
        cap = cx.c(m.softcap)
        logits = np.tanh(logits / cap) * cap
    return logits


_cache = {}


def load(model_path):
    m = _cache.get(model_path)
    if m is None:
        m = _cache[model_path] = Model(model_path)
    return m


def logits(model_path, token_ids, act_quant=True, gelu_f16_table=False, trace=None,
           dtype=np.float64):
    """Logits for every position, float64 [len(token_ids), n_vocab].

    trace(name, array) is called with intermediate results named like
    llama.cpp's graph callbacks (attn_norm-IL, Qcur-IL, Kcur-IL, Vcur-IL after
    RoPE, kqv_out-IL, ffn_out-IL, l_out-IL, result_norm), for debugging.

    dtype=np.float32 runs the same computation in float32 (like an
    implementation would); used to estimate how far float32 rounding alone
    moves the logits.  The default float64 is the reference.
    """
    return _forward(load(model_path), token_ids, act_quant=act_quant,
                    gelu_f16_table=gelu_f16_table, trace=trace, dtype=dtype)


def main(argv):
    if len(argv) < 3:
        print("usage: forward_ref.py MODEL.gguf ID [ID ...]", file=sys.stderr)
        return 2
    ids = [int(v) for v in argv[2:]]
    lg = logits(argv[1], ids)
    for i, row in enumerate(lg):
        top = np.argsort(-row)[:5]
        print(i, ids[i], " ".join(f"{t}:{row[t]:.4f}" for t in top))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
