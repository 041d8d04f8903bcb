//! Memory vectors: L2-normalized, quantized to int8 with `scale = max|v|/127`, base64 bytes; the
//! sparse hash embedding (`caveman.sparse-hash.v1:<dims>`).

use super::{tokens, Vector};

const B64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

fn b64_encode(bytes: &[u8]) -> String {
  let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
  for chunk in bytes.chunks(3) {
    let n = (chunk[0] as u32) << 16 | (*chunk.get(1).unwrap_or(&0) as u32) << 8 | *chunk.get(2).unwrap_or(&0) as u32;
    for i in 0..4 {
      if i <= chunk.len() {
        out.push(B64[(n >> (18 - 6 * i) & 63) as usize] as char);
      } else {
        out.push('=');
      }
    }
  }
  out
}

fn b64_decode(text: &str) -> Option<Vec<u8>> {
  let mut out = Vec::with_capacity(text.len() / 4 * 3);
  let mut buf = 0u32;
  let mut bits = 0;
  for c in text.bytes() {
    if c == b'=' {
      break;
    }
    let v = B64.iter().position(|b| *b == c)? as u32;
    buf = buf << 6 | v;
    bits += 6;
    if bits >= 8 {
      bits -= 8;
      out.push((buf >> bits & 0xff) as u8);
    }
  }
  Some(out)
}

/// `packVector(adapterId, numbers)`.
pub fn pack(adapter: &str, values: &[f64]) -> Vector {
  let norm = values.iter().map(|v| v * v).sum::<f64>().sqrt();
  let unit: Vec<f64> = if norm > 0.0 { values.iter().map(|v| v / norm).collect() } else { values.to_vec() };
  let max = unit.iter().fold(0.0f64, |m, v| m.max(v.abs()));
  let scale = if max > 0.0 { max / 127.0 } else { 0.0 };
  let bytes: Vec<u8> = unit
    .iter()
    .map(|v| if scale > 0.0 { (v / scale).round().clamp(-127.0, 127.0) as i8 as u8 } else { 0 })
    .collect();
  Vector {
    adapter: adapter.to_string(),
    dimensions: values.len() as u32,
    scale,
    data: b64_encode(&bytes),
  }
}

/// The vector's int8 components.
pub(crate) fn raw(v: &Vector) -> Option<Vec<i8>> {
  let bytes = b64_decode(&v.data)?;
  (bytes.len() == v.dimensions as usize).then(|| bytes.into_iter().map(|b| b as i8).collect())
}

/// The vector's values (dequantized).
pub fn unpack(v: &Vector) -> Option<Vec<f32>> {
  let bytes = b64_decode(&v.data)?;
  if bytes.len() != v.dimensions as usize {
    return None;
  }
  Some(bytes.iter().map(|b| (*b as i8) as f32 * v.scale as f32).collect())
}

/// Cosine of two vectors of one adapter and size (0 otherwise).
pub fn cosine(a: &[f32], b: &[f32]) -> f64 {
  if a.len() != b.len() || a.is_empty() {
    return 0.0;
  }
  let (mut dot, mut na, mut nb) = (0f32, 0f32, 0f32);
  for (x, y) in a.iter().zip(b) {
    dot += x * y;
    na += x * x;
    nb += y * y;
  }
  if na == 0.0 || nb == 0.0 {
    return 0.0;
  }
  (dot / (na.sqrt() * nb.sqrt())) as f64
}

fn fnv(s: &str) -> u64 {
  s.bytes().fold(0xcbf29ce484222325u64, |h, b| (h ^ b as u64).wrapping_mul(0x100000001b3))
}

/// The sparse hash embedding: each token (and each adjacent pair) adds ±1 at a hashed index.
pub fn sparse_embed(text: &str, dimensions: usize) -> Vec<f64> {
  let mut v = vec![0.0; dimensions];
  let toks = tokens(text);
  let mut add = |key: &str, w: f64| {
    let h = fnv(key);
    let sign = if h >> 63 == 0 { 1.0 } else { -1.0 };
    v[(h % dimensions as u64) as usize] += sign * w;
  };
  for t in &toks {
    add(t, 1.0);
  }
  for pair in toks.windows(2) {
    add(&format!("{} {}", pair[0], pair[1]), 0.5);
  }
  v
}
