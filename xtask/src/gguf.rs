//! A small GGUF writer for `cargo xtask gpu-check` (and `cargo xtask gguf`): a llama-architecture
//! model with random Q4_0 weights in a real model's shapes, a byte-fallback vocabulary and a
//! ChatML template. Speed does not depend on the weights' values, so a 27B-shaped file measures
//! what a real 27B model would, without downloading 16 GB.

use anyhow::{bail, Context, Result};
use std::io::{BufWriter, Seek, Write};
use std::path::Path;

/// The shapes of a model: everything that decides its speed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Shape {
    /// What the shape is called on the command line.
    pub(crate) name: &'static str,
    /// Hidden size.
    pub(crate) n_embd: u64,
    /// Transformer blocks.
    pub(crate) n_layer: u64,
    /// Query heads.
    pub(crate) n_head: u64,
    /// Key/value heads (grouped-query attention).
    pub(crate) n_head_kv: u64,
    /// Size of one attention head.
    pub(crate) head_dim: u64,
    /// Feed-forward size.
    pub(crate) n_ff: u64,
    /// Vocabulary size.
    pub(crate) n_vocab: u64,
}

/// Gemma 3 27B's shapes (62 blocks, 5376 wide, 32 query and 16 key/value heads of 128,
/// feed-forward 21504, 262144-token vocabulary): about 27.0 billion weights, 15.2 GB as Q4_0.
/// Written as a llama-architecture model (no sliding-window layers), which costs the same
/// matrix work per token.
pub(crate) const GEMMA3_27B: Shape = Shape {
    name: "gemma3-27b",
    n_embd: 5376,
    n_layer: 62,
    n_head: 32,
    n_head_kv: 16,
    head_dim: 128,
    n_ff: 21504,
    n_vocab: 262_144,
};

/// A 2-block, 64-wide model for tests: a few hundred kilobytes.
pub(crate) const TINY: Shape = Shape {
    name: "tiny",
    n_embd: 64,
    n_layer: 2,
    n_head: 4,
    n_head_kv: 2,
    head_dim: 16,
    n_ff: 128,
    n_vocab: 512,
};

/// The shapes `--shape` accepts.
pub(crate) const SHAPES: &[Shape] = &[GEMMA3_27B, TINY];

/// Finds a shape by name.
pub(crate) fn shape(name: &str) -> Result<Shape> {
    SHAPES
        .iter()
        .copied()
        .find(|s| s.name == name)
        .with_context(|| {
            let names: Vec<_> = SHAPES.iter().map(|s| s.name).collect();
            format!("unknown shape {name:?}; known: {}", names.join(", "))
        })
}

const ALIGN: u64 = 32;
const Q4_0: u32 = 2;
const F32: u32 = 0;
/// Q4_0: 32 weights in 18 bytes (an f16 scale and 16 bytes of 4-bit values).
const Q4_0_BLOCK: u64 = 32;
const Q4_0_BYTES: u64 = 18;
/// Special tokens, then the 256 byte tokens.
const SPECIALS: [&str; 5] = ["<unk>", "<s>", "</s>", "<|im_start|>", "<|im_end|>"];
const CHATML: &str = "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}";

/// One tensor: name, dimensions (innermost first, as GGUF stores them) and type.
struct Tensor {
    name: String,
    dims: Vec<u64>,
    kind: u32,
}

impl Tensor {
    fn bytes(&self) -> u64 {
        let n: u64 = self.dims.iter().product();
        if self.kind == Q4_0 {
            n / Q4_0_BLOCK * Q4_0_BYTES
        } else {
            n * 4
        }
    }
}

fn tensors(s: &Shape) -> Result<Vec<Tensor>> {
    if !s.n_embd.is_multiple_of(Q4_0_BLOCK) || !s.n_ff.is_multiple_of(Q4_0_BLOCK) || s.n_vocab < 262
    {
        bail!(
            "shape {}: widths must be multiples of {Q4_0_BLOCK} and the vocabulary hold at least 262 tokens",
            s.name
        );
    }
    let q = |name: String, dims: [u64; 2]| Tensor {
        name,
        dims: dims.to_vec(),
        kind: Q4_0,
    };
    let norm = |name: String| Tensor {
        name,
        dims: vec![s.n_embd],
        kind: F32,
    };
    let mut out = vec![
        q("token_embd.weight".into(), [s.n_embd, s.n_vocab]),
        norm("output_norm.weight".into()),
    ];
    let (q_dim, kv_dim) = (s.n_head * s.head_dim, s.n_head_kv * s.head_dim);
    for i in 0..s.n_layer {
        let b = |t: &str| format!("blk.{i}.{t}.weight");
        out.push(norm(b("attn_norm")));
        out.push(q(b("attn_q"), [s.n_embd, q_dim]));
        out.push(q(b("attn_k"), [s.n_embd, kv_dim]));
        out.push(q(b("attn_v"), [s.n_embd, kv_dim]));
        out.push(q(b("attn_output"), [q_dim, s.n_embd]));
        out.push(norm(b("ffn_norm")));
        out.push(q(b("ffn_gate"), [s.n_embd, s.n_ff]));
        out.push(q(b("ffn_up"), [s.n_embd, s.n_ff]));
        out.push(q(b("ffn_down"), [s.n_ff, s.n_embd]));
    }
    Ok(out)
}

/// How many weights a shape has.
pub(crate) fn weights(s: &Shape) -> Result<u64> {
    Ok(tensors(s)?
        .iter()
        .map(|t| t.dims.iter().product::<u64>())
        .sum())
}

enum Kv {
    U32(u32),
    F32(f32),
    Str(String),
    Strs(Vec<String>),
    F32s(Vec<f32>),
    I32s(Vec<i32>),
}

fn metadata(s: &Shape) -> Vec<(&'static str, Kv)> {
    let mut tokens: Vec<String> = SPECIALS.iter().map(|t| (*t).to_owned()).collect();
    let mut types = vec![2, 3, 3, 3, 3];
    for b in 0..=255u8 {
        tokens.push(format!("<0x{b:02X}>"));
        types.push(6);
    }
    while (tokens.len() as u64) < s.n_vocab {
        tokens.push(format!("<unused{}>", tokens.len()));
        types.push(5);
    }
    let n = tokens.len();
    let u = |v: u64| Kv::U32(u32::try_from(v).unwrap_or(u32::MAX));
    vec![
        ("general.architecture", Kv::Str("llama".into())),
        ("general.name", Kv::Str(format!("random {}", s.name))),
        ("general.file_type", Kv::U32(2)),
        ("general.alignment", u(ALIGN)),
        ("llama.context_length", Kv::U32(32_768)),
        ("llama.embedding_length", u(s.n_embd)),
        ("llama.block_count", u(s.n_layer)),
        ("llama.feed_forward_length", u(s.n_ff)),
        ("llama.attention.head_count", u(s.n_head)),
        ("llama.attention.head_count_kv", u(s.n_head_kv)),
        ("llama.attention.key_length", u(s.head_dim)),
        ("llama.attention.value_length", u(s.head_dim)),
        ("llama.rope.dimension_count", u(s.head_dim)),
        ("llama.rope.freq_base", Kv::F32(10_000.0)),
        ("llama.attention.layer_norm_rms_epsilon", Kv::F32(1e-6)),
        ("llama.vocab_size", u(s.n_vocab)),
        ("tokenizer.ggml.model", Kv::Str("llama".into())),
        ("tokenizer.ggml.tokens", Kv::Strs(tokens)),
        ("tokenizer.ggml.scores", Kv::F32s(vec![0.0; n])),
        ("tokenizer.ggml.token_type", Kv::I32s(types)),
        ("tokenizer.ggml.unknown_token_id", Kv::U32(0)),
        ("tokenizer.ggml.bos_token_id", Kv::U32(1)),
        ("tokenizer.ggml.eos_token_id", Kv::U32(4)),
        ("tokenizer.chat_template", Kv::Str(CHATML.into())),
    ]
}

fn put_str(w: &mut impl Write, s: &str) -> std::io::Result<()> {
    w.write_all(&(s.len() as u64).to_le_bytes())?;
    w.write_all(s.as_bytes())
}

fn put_kv(w: &mut impl Write, key: &str, value: &Kv) -> std::io::Result<()> {
    put_str(w, key)?;
    let array = |w: &mut dyn Write, kind: u32, n: usize| -> std::io::Result<()> {
        w.write_all(&9u32.to_le_bytes())?;
        w.write_all(&kind.to_le_bytes())?;
        w.write_all(&(n as u64).to_le_bytes())
    };
    match value {
        Kv::U32(v) => {
            w.write_all(&4u32.to_le_bytes())?;
            w.write_all(&v.to_le_bytes())
        }
        Kv::F32(v) => {
            w.write_all(&6u32.to_le_bytes())?;
            w.write_all(&v.to_le_bytes())
        }
        Kv::Str(v) => {
            w.write_all(&8u32.to_le_bytes())?;
            put_str(w, v)
        }
        Kv::Strs(vs) => {
            array(w, 8, vs.len())?;
            vs.iter().try_for_each(|v| put_str(w, v))
        }
        Kv::F32s(vs) => {
            array(w, 6, vs.len())?;
            vs.iter().try_for_each(|v| w.write_all(&v.to_le_bytes()))
        }
        Kv::I32s(vs) => {
            array(w, 5, vs.len())?;
            vs.iter().try_for_each(|v| w.write_all(&v.to_le_bytes()))
        }
    }
}

/// A cheap deterministic generator (xorshift64*): random enough for weights nobody reads.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
}

/// Writes a model of shape `s` with random Q4_0 weights to `path` (through `path.part`, renamed
/// when complete). Returns the file's size in bytes.
pub(crate) fn write(path: &Path, s: &Shape, seed: u64) -> Result<u64> {
    let tensors = tensors(s)?;
    let part = path.with_extension("gguf.part");
    let file = std::fs::File::create(&part)
        .with_context(|| format!("could not create {}", part.display()))?;
    let mut w = BufWriter::with_capacity(8 << 20, file);
    let meta = metadata(s);
    w.write_all(b"GGUF")?;
    w.write_all(&3u32.to_le_bytes())?;
    w.write_all(&(tensors.len() as u64).to_le_bytes())?;
    w.write_all(&(meta.len() as u64).to_le_bytes())?;
    for (k, v) in &meta {
        put_kv(&mut w, k, v)?;
    }
    let mut offset = 0u64;
    for t in &tensors {
        put_str(&mut w, &t.name)?;
        w.write_all(&(t.dims.len() as u32).to_le_bytes())?;
        for d in &t.dims {
            w.write_all(&d.to_le_bytes())?;
        }
        w.write_all(&t.kind.to_le_bytes())?;
        w.write_all(&offset.to_le_bytes())?;
        offset += t.bytes().div_ceil(ALIGN) * ALIGN;
    }
    pad(&mut w)?;
    // One random block pattern of 1 MiB, reused with a rotating start: generating 15 GB of
    // fresh randomness would take longer than writing it.
    let mut rng = Rng(seed | 1);
    let mut pattern = vec![0u8; 1 << 20];
    for chunk in pattern.chunks_mut(8) {
        let r = rng.next().to_le_bytes();
        chunk.copy_from_slice(&r[..chunk.len()]);
    }
    // Every block's f16 scale is 2^-7 (0x2000): small, finite weights.
    for block in pattern.chunks_mut(Q4_0_BYTES as usize) {
        if block.len() == Q4_0_BYTES as usize {
            block[0] = 0x00;
            block[1] = 0x20;
        }
    }
    let usable = (pattern.len() as u64 / Q4_0_BYTES * Q4_0_BYTES) as usize;
    for (i, t) in tensors.iter().enumerate() {
        let mut left = t.bytes();
        if t.kind == F32 {
            for _ in 0..t.dims[0] {
                w.write_all(&1.0f32.to_le_bytes())?;
            }
        } else {
            let mut start = (i * 18 * 7) % usable;
            start -= start % Q4_0_BYTES as usize;
            while left > 0 {
                let n = (left as usize).min(usable - start);
                w.write_all(&pattern[start..start + n])?;
                left -= n as u64;
                start = 0;
            }
        }
        pad(&mut w)?;
    }
    w.flush()?;
    let size = w.stream_position()?;
    drop(w);
    std::fs::rename(&part, path)
        .with_context(|| format!("could not rename {} to {}", part.display(), path.display()))?;
    Ok(size)
}

fn pad(w: &mut BufWriter<std::fs::File>) -> std::io::Result<()> {
    let at = w.stream_position()?;
    let n = at.div_ceil(ALIGN) * ALIGN - at;
    w.write_all(&vec![0u8; n as usize])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn u64_at(b: &[u8], at: usize) -> u64 {
        u64::from_le_bytes(b[at..at + 8].try_into().unwrap())
    }

    #[test]
    fn the_27b_shape_has_about_27_billion_weights() {
        let n = weights(&GEMMA3_27B).unwrap();
        assert!((26_500_000_000..27_500_000_000).contains(&n), "{n}");
    }

    #[test]
    fn a_tiny_model_is_a_well_formed_gguf_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tiny.gguf");
        let size = write(&path, &TINY, 7).unwrap();
        let bytes = std::fs::read(&path).unwrap();
        assert_eq!(bytes.len() as u64, size);
        assert!(!path.with_extension("gguf.part").exists());
        assert_eq!(&bytes[..4], b"GGUF");
        assert_eq!(u32::from_le_bytes(bytes[4..8].try_into().unwrap()), 3);
        let n_tensors = u64_at(&bytes, 8);
        assert_eq!(n_tensors, 2 + 9 * TINY.n_layer);
        assert_eq!(u64_at(&bytes, 16), metadata(&TINY).len() as u64);
        // Header, then the tensors' data, each aligned: the data is exactly where it should be.
        let data: u64 = tensors(&TINY)
            .unwrap()
            .iter()
            .map(|t| t.bytes().div_ceil(ALIGN) * ALIGN)
            .sum();
        assert_eq!(size % ALIGN, 0);
        assert!(size > data, "{size} {data}");
        // The first Q4_0 block starts with the scale 2^-7.
        let first = (size - data) as usize;
        assert_eq!(&bytes[first..first + 2], &[0x00, 0x20]);
        // The same seed writes the same file.
        let again = dir.path().join("again.gguf");
        write(&again, &TINY, 7).unwrap();
        assert_eq!(std::fs::read(&again).unwrap(), bytes);
    }

    #[test]
    fn unknown_shapes_are_refused_with_the_known_ones() {
        let err = shape("70b").unwrap_err().to_string();
        assert!(err.contains("gemma3-27b, tiny"), "{err}");
        assert_eq!(shape("tiny").unwrap(), TINY);
    }
}
