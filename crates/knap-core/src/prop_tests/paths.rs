//! Path resolution against the reference's algorithm as an oracle, on random trees of
//! directories, files and symlinks (relative, absolute, outward, dangling, through files,
//! loops) and random candidates (`.`, `..`, absolute ones through the outside): the one-pass
//! descriptor walk computes what realpath-of-the-deepest-existing-ancestor computes, the
//! containment verdict follows from it, whatever resolves inside to a regular file opens
//! beneath the root to that very file, and the one-step open (`resolve_open_read`) answers as
//! the two steps do.

use std::io::Read;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};

use proptest::prelude::*;

use crate::workspace::{canonicalize_existing_prefix, check_path, normalize, Workspace};

/// The reference's algorithm: realpath of the deepest existing ancestor (popping a component
/// while realpath says it does not exist: `ENOENT`, or `ENOTDIR` through a file), the missing
/// tail re-attached; any other failure (`ELOOP`) is the error.
fn oracle(full: &Path) -> Result<PathBuf, i32> {
  let mut existing = full.to_path_buf();
  let mut tail = Vec::new();
  loop {
    match std::fs::canonicalize(&existing) {
      Ok(canon) => {
        let mut out = canon;
        for part in tail.iter().rev() {
          out.push(part);
        }
        return Ok(out);
      }
      Err(e) if matches!(e.raw_os_error(), Some(libc::ENOENT) | Some(libc::ENOTDIR)) => {}
      Err(e) => return Err(e.raw_os_error().unwrap_or(0)),
    }
    match existing.file_name() {
      Some(name) => {
        tail.push(name.to_os_string());
        existing.pop();
      }
      None => return Ok(full.to_path_buf()),
    }
  }
}

const NAMES: [&str; 4] = ["a", "b", "c", "d"];

#[derive(Debug, Clone)]
enum Entry {
  Dir,
  File,
  /// A symlink; the target is a template: `@ws` / `@out` become the absolute workspace / the
  /// outside directory.
  Link(&'static str),
}

fn target() -> impl Strategy<Value = &'static str> {
  prop::sample::select(vec![
    "a", "b/c", "..", "../a", "../..", "../../out", ".", "nowhere", "a/nowhere/x", "d/b", "c",
    "@ws", "@ws/a", "@ws/b/c", "@out", "@out/secret", "/", "../../ws/a", "a/../b",
  ])
}

fn entry() -> impl Strategy<Value = Entry> {
  prop_oneof![2 => Just(Entry::Dir), 1 => Just(Entry::File), 2 => target().prop_map(Entry::Link)]
}

/// Entries at `a`..`d`, and under each directory one more level (and a third for `a/a`).
fn tree() -> impl Strategy<Value = Vec<(String, Entry)>> {
  proptest::collection::vec(entry(), 4 + 16 + 4).prop_map(|es| {
    let mut out = Vec::new();
    let mut it = es.into_iter();
    for n in NAMES {
      out.push((n.to_string(), it.next().unwrap()));
    }
    for n in NAMES {
      for m in NAMES {
        out.push((format!("{n}/{m}"), it.next().unwrap()));
      }
    }
    for m in NAMES {
      out.push((format!("a/a/{m}"), it.next().unwrap()));
    }
    out
  })
}

fn candidate() -> impl Strategy<Value = String> {
  (
    prop::sample::select(vec!["", "", "", "@ws/", "@out/", "@out/link/"]),
    proptest::collection::vec(prop::sample::select(vec!["a", "b", "c", "d", ".", "..", "x", ""]), 0..7),
  )
    .prop_map(|(prefix, parts)| format!("{prefix}{}", parts.join("/")))
}

fn expand(t: &str, ws: &Path, out: &Path) -> String {
  t.replace("@ws", ws.to_str().unwrap()).replace("@out", out.to_str().unwrap())
}

proptest! {
  #![proptest_config(super::config(192))]

  #[test]
  fn resolution_agrees_with_the_reference(spec in tree(), candidates in proptest::collection::vec(candidate(), 8)) {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().canonicalize().unwrap();
    let ws = base.join("ws");
    let out = base.join("out");
    std::fs::create_dir(&ws).unwrap();
    std::fs::create_dir(&out).unwrap();
    std::fs::write(out.join("secret"), "outside").unwrap();
    // A way back in from outside, for absolute candidates.
    symlink(&ws, out.join("link")).unwrap();
    for (rel, e) in &spec {
      let p = ws.join(rel);
      // A parent that is not a directory (a file or a symlink) cannot hold entries.
      if !std::fs::symlink_metadata(p.parent().unwrap()).is_ok_and(|m| m.is_dir()) {
        continue;
      }
      match e {
        Entry::Dir => std::fs::create_dir(&p).unwrap(),
        Entry::File => std::fs::write(&p, format!("file {rel}")).unwrap(),
        Entry::Link(t) => symlink(expand(t, &ws, &out), &p).unwrap(),
      }
    }
    let w = Workspace::new(&ws);
    let root = w.root().unwrap();
    for c in candidates {
      let c = expand(&c, &ws, &out);
      prop_assert!(check_path(&c).is_ok());
      let lexical = normalize(&if Path::new(&c).is_absolute() { PathBuf::from(&c) } else { ws.join(&c) });
      let want = oracle(&lexical);
      let got = canonicalize_existing_prefix(&root, &lexical).map_err(|e| e.raw_os_error().unwrap_or(0));
      prop_assert_eq!(&got, &want, "candidate {:?} in {:?}", c, spec);
      let resolved = w.resolve(&c);
      match &want {
        Ok(full) => {
          prop_assert_eq!(resolved.is_ok(), full.starts_with(&ws), "{}", c);
          if let Ok(r) = &resolved {
            prop_assert_eq!(&r.abs, full);
            // What resolved inside to a regular file opens beneath the root to that file.
            if std::fs::symlink_metadata(full).is_ok_and(|m| m.is_file()) {
              let mut f = w.open_read(&c, r, "open").unwrap();
              let mut s = String::new();
              f.read_to_string(&mut s).unwrap();
              prop_assert_eq!(s, std::fs::read_to_string(full).unwrap());
            }
          }
        }
        Err(_) => prop_assert!(resolved.is_err()),
      }
      // The one-step open gives what the two steps give: the same resolution and file, or the
      // same error.
      let two = w.resolve(&c).and_then(|r| w.open_read(&c, &r, "open").map(|f| (r, f)));
      let one = w.resolve_open_read(&c, "open");
      let plain = w.open_read_plain(&c).unwrap();
      match (&one, &two) {
        (Ok((r1, f1)), Ok((r2, f2))) => {
          prop_assert_eq!(&r1.abs, &r2.abs, "{}", c);
          prop_assert_eq!(&r1.rel, &r2.rel, "{}", c);
          prop_assert_eq!(identity(f1), identity(f2), "{}", c);
        }
        (Err(e1), Err(e2)) => prop_assert_eq!(e1.to_string(), e2.to_string(), "{}", c),
        _ => prop_assert!(false, "{}: one step {:?}, two steps {:?}", c, one.as_ref().map(|x| &x.0), two.as_ref().map(|x| &x.0)),
      }
      // It applies exactly when no symlink is on the (lexically inside) way and the target exists
      // (and there is an openat2: never with `--cfg knap_portable`).
      let plain_path = cfg!(all(target_os = "linux", not(knap_portable)))
        && lexical.strip_prefix(&ws).is_ok()
        && lexical.ancestors().take_while(|a| a.starts_with(&ws) && *a != ws).all(|a| std::fs::symlink_metadata(a).is_ok_and(|m| !m.file_type().is_symlink()))
        && (lexical == ws || std::fs::symlink_metadata(&lexical).is_ok_and(|m| m.is_file() || m.is_dir()));
      prop_assert_eq!(plain.is_some(), plain_path, "{}", c);
    }
  }
}

/// A file's (device, inode).
fn identity(f: &std::fs::File) -> (u64, u64) {
  use std::os::unix::fs::MetadataExt;
  let m = f.metadata().unwrap();
  (m.dev(), m.ino())
}

proptest! {
  #![proptest_config(super::config(2048))]

  /// Every byte string is shown as text that names it again, and UTF-8 without the escape
  /// range is shown as it is.
  #[test]
  fn file_names_round_trip_through_their_text(
    bytes in proptest::collection::vec(prop_oneof![any::<u8>(), 0x80u8..=0xff, Just(0xee), Just(0xbe)], 0..24),
    text in "[a-zé€\u{EF80}-\u{EFFF}]{0,8}",
  ) {
    use crate::workspace::{name_bytes, name_text};
    let shown = name_text(&bytes);
    let back = name_bytes(&shown).into_owned();
    prop_assert_eq!(back, bytes.clone());
    let t = name_text(text.as_bytes());
    let back = name_bytes(&t).into_owned();
    prop_assert_eq!(back, text.as_bytes().to_vec());
    if let Ok(s) = std::str::from_utf8(&bytes) {
      if !s.chars().any(|c| ('\u{EF80}'..='\u{EFFF}').contains(&c)) {
        prop_assert_eq!(shown.as_ref(), s);
      }
    }
  }
}
