//! `edit_file` on files that are not UTF-8: the bytes outside the replaced span come back bit for
//! bit (Latin-1, UTF-16, random binary), and an edit that cannot match leaves the file as it was.

use knap_core::tools::{ShellTools, ShellToolsConfig};
use serde_json::json;
use tokio_util::sync::CancellationToken;

struct Ws {
  dir: tempfile::TempDir,
  tools: ShellTools,
}

fn ws() -> Ws {
  let dir = tempfile::tempdir().unwrap();
  let tools = ShellTools::new(ShellToolsConfig::new(dir.path())).unwrap();
  Ws { dir, tools }
}

impl Ws {
  async fn edit(&self, name: &str, old: &str, new: &str, all: bool) -> Result<String, (String, String)> {
    self
      .tools
      .execute(
        "edit_file",
        &json!({"path": name, "old_string": old, "new_string": new, "replace_all": all}),
        CancellationToken::new(),
      )
      .await
      .map(|o| o.text)
      .map_err(|e| (e.code, e.message))
  }
  fn put(&self, name: &str, bytes: &[u8]) {
    std::fs::write(self.dir.path().join(name), bytes).unwrap();
  }
  fn get(&self, name: &str) -> Vec<u8> {
    std::fs::read(self.dir.path().join(name)).unwrap()
  }
}

/// xorshift: deterministic "random" bytes.
fn noise(seed: u64, n: usize) -> Vec<u8> {
  let mut x = seed | 1;
  (0..n)
    .map(|_| {
      x ^= x << 13;
      x ^= x >> 7;
      x ^= x << 17;
      x as u8
    })
    .collect()
}

fn spliced(parts: &[&[u8]]) -> Vec<u8> {
  parts.concat()
}

#[tokio::test]
async fn latin1_round_trip() {
  let w = ws();
  // "Ærøskøbing café – naïve" in Latin-1, with a marker to edit.
  let before: &[u8] = b"\xc6r\xf8sk\xf8bing caf\xe9 \x96 na\xefve\n";
  let after: &[u8] = b"\nfin \xe9\xe8\xea\xff\n";
  w.put("l1.txt", &spliced(&[before, b"VERSION = 1", after]));
  assert_eq!(w.edit("l1.txt", "VERSION = 1", "VERSION = 2", false).await.unwrap(), "edited l1.txt: 1 replacement");
  assert_eq!(w.get("l1.txt"), spliced(&[before, b"VERSION = 2", after]));
  // A short ASCII needle that occurs next to Latin-1 bytes, replaced everywhere.
  w.put("l2.txt", b"\xe9a\xe9a\xe9");
  assert_eq!(w.edit("l2.txt", "a", "\u{00e9}", true).await.unwrap(), "edited l2.txt: 2 replacements");
  assert_eq!(w.get("l2.txt"), b"\xe9\xc3\xa9\xe9\xc3\xa9\xe9".to_vec(), "new text is UTF-8, old bytes are kept");
}

#[tokio::test]
async fn utf16_round_trip() {
  let w = ws();
  let utf16: Vec<u8> = [0xFEFFu16]
    .into_iter()
    .chain("héllo wörld\r\n".encode_utf16())
    .flat_map(|u| u.to_le_bytes())
    .collect();
  // A UTF-8 needle does not occur in UTF-16 text: refused, the file is untouched.
  w.put("u16.txt", &utf16);
  let (code, message) = w.edit("u16.txt", "wörld", "world", false).await.unwrap_err();
  assert_eq!(code, "cave_edit_not_found");
  assert_eq!(message, "caveman-code: old_string not found in u16.txt");
  assert_eq!(w.get("u16.txt"), utf16);
  // A UTF-16 file with an ASCII trailer: the trailer is edited, the UTF-16 bytes are kept.
  let mixed = spliced(&[&utf16, b"# tag: draft\n"]);
  w.put("mixed.txt", &mixed);
  w.edit("mixed.txt", "draft", "final", false).await.unwrap();
  assert_eq!(w.get("mixed.txt"), spliced(&[&utf16, b"# tag: final\n"]));
}

#[tokio::test]
async fn random_binary_round_trip() {
  let w = ws();
  let marker = "<<knap-edit-marker>>";
  for seed in 1..=64u64 {
    let head = noise(seed, (seed as usize * 997) % 5000);
    let tail = noise(seed.wrapping_mul(31), (seed as usize * 613) % 7000);
    let file = spliced(&[&head, marker.as_bytes(), &tail]);
    w.put("bin", &file);
    w.edit("bin", marker, "REPLACED\u{2603}", false).await.unwrap();
    assert_eq!(w.get("bin"), spliced(&[&head, "REPLACED\u{2603}".as_bytes(), &tail]), "seed {seed}");
  }
}

#[tokio::test]
async fn fffd_copied_from_the_lossy_view_is_refused_with_a_hint() {
  let w = ws();
  w.put("x.txt", b"name = caf\xe9\n");
  // read_file shows the 0xE9 byte as U+FFFD; an old_string copied from that cannot match it.
  let (code, message) = w.edit("x.txt", "caf\u{FFFD}", "cafe", false).await.unwrap_err();
  assert_eq!(code, "cave_edit_not_found");
  let mut lines = message.lines();
  assert_eq!(lines.next(), Some("caveman-code: old_string not found in x.txt"));
  assert!(lines.next().unwrap().contains("U+FFFD"));
  assert_eq!(w.get("x.txt"), b"name = caf\xe9\n".to_vec());
}
