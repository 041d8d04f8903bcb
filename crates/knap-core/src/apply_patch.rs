//! The apply-patch format (Codex's, as bashkit's `Patch` tool takes it): parsing, matching hunks
//! against a file (exactly, then ignoring trailing whitespace, surrounding whitespace, then
//! typographic punctuation), and planning a whole patch against a view of the files, so that two
//! updates of one file compose and a failing hunk anywhere means nothing is written.
//!
//! The module does no I/O: [`plan`] takes the files' current contents and returns their final
//! states; the AI SDK `Patch` tool (`agent_tools::patch`) reads and writes them through the
//! sandbox. Fixture scenarios under `tests/apply_patch/` (input files, patch, expected files or
//! error) pin the behaviour.

use std::collections::HashMap;

const BEGIN: &str = "*** Begin Patch";
const END: &str = "*** End Patch";
const ADD: &str = "*** Add File:";
const DELETE: &str = "*** Delete File:";
const UPDATE: &str = "*** Update File:";
const MOVE: &str = "*** Move to: ";
const EOF_MARK: &str = "*** End of File";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
  Context,
  Remove,
  Add,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chunk {
  /// The `@@ <line>` the chunk's lines follow, if any.
  pub change_context: Option<String>,
  pub old_lines: Vec<String>,
  pub new_lines: Vec<String>,
  /// Every line of the chunk in order.
  pub ops: Vec<(Op, String)>,
  pub is_end_of_file: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Hunk {
  Add {
    path: String,
    content: String,
  },
  Delete {
    path: String,
  },
  Update {
    path: String,
    move_path: Option<String>,
    chunks: Vec<Chunk>,
  },
}

impl Hunk {
  pub fn path(&self) -> &str {
    match self {
      Hunk::Add { path, .. } | Hunk::Delete { path } | Hunk::Update { path, .. } => path,
    }
  }

  /// The path and, for a move, its target.
  pub fn paths(&self) -> impl Iterator<Item = &str> {
    let target = match self {
      Hunk::Update { move_path, .. } => move_path.as_deref(),
      _ => None,
    };
    std::iter::once(self.path()).chain(target)
  }
}

fn at_line(message: String, line: usize) -> String {
  format!("Line {line}: {message}")
}

/// JavaScript's `String.prototype.trim` (White_Space and the BOM).
fn js_trim(s: &str) -> &str {
  s.trim_matches(|c: char| c.is_whitespace() || c == '\u{FEFF}')
}

/// Parses a patch. The error is the message bashkit's tool returns.
pub fn parse(text: &str) -> Result<Vec<Hunk>, String> {
  let trimmed = js_trim(text);
  let mut lines: Vec<&str> = trimmed
    .split('\n')
    .map(|l| l.strip_suffix('\r').unwrap_or(l))
    .collect();
  // A patch wrapped in a heredoc (`<<EOF … EOF`), as models sometimes send it.
  let heredoc = |l: &str| {
    let inner = l.strip_prefix("<<").unwrap_or("");
    let inner = inner.strip_prefix(['\'', '"']).unwrap_or(inner);
    let inner = inner.strip_suffix(['\'', '"']).unwrap_or(inner);
    l.starts_with("<<") && inner == "EOF"
  };
  if lines.len() >= 4 && heredoc(lines[0]) && lines[lines.len() - 1].ends_with("EOF") {
    lines = lines[1..lines.len() - 1].to_vec();
  }
  if lines.first().map(|l| js_trim(l)) != Some(BEGIN) {
    return Err(format!("The first line of the patch must be '{BEGIN}'"));
  }
  if lines.len() < 2 || js_trim(lines[lines.len() - 1]) != END {
    return Err(format!("The last line of the patch must be '{END}'"));
  }
  let body = &lines[1..lines.len() - 1];
  let line_no = |k: usize| k + 2;
  let mut hunks = Vec::new();
  let mut i = 0;
  while i < body.len() {
    let header = js_trim(body[i]);
    if header.is_empty() {
      i += 1;
      continue;
    }
    if let Some(rest) = header.strip_prefix(ADD) {
      let path = js_trim(rest).to_string();
      if path.is_empty() {
        return Err(at_line("Add File hunk has empty path".into(), line_no(i)));
      }
      i += 1;
      let mut content = String::new();
      while i < body.len() && body[i].starts_with('+') {
        content.push_str(&body[i][1..]);
        content.push('\n');
        i += 1;
      }
      hunks.push(Hunk::Add { path, content });
      continue;
    }
    if let Some(rest) = header.strip_prefix(DELETE) {
      let path = js_trim(rest).to_string();
      if path.is_empty() {
        return Err(at_line("Delete File hunk has empty path".into(), line_no(i)));
      }
      hunks.push(Hunk::Delete { path });
      i += 1;
      continue;
    }
    if let Some(rest) = header.strip_prefix(UPDATE) {
      let path = js_trim(rest).to_string();
      if path.is_empty() {
        return Err(at_line("Update File hunk has empty path".into(), line_no(i)));
      }
      let start = i;
      i += 1;
      let mut move_path = None;
      if i < body.len() {
        if let Some(target) = body[i].strip_prefix(MOVE) {
          move_path = Some(js_trim(target).to_string());
          i += 1;
        }
      }
      let mut chunks = Vec::new();
      while i < body.len() {
        let next_is_marker =
          i + 1 >= body.len() || body[i + 1].starts_with("***") || body[i + 1].starts_with("@@");
        if js_trim(body[i]).is_empty() && next_is_marker {
          i += 1;
          continue;
        }
        if body[i].starts_with("***") && body[i] != EOF_MARK {
          break;
        }
        let mut change_context = None;
        if body[i] == "@@" {
          i += 1;
        } else if let Some(ctx) = body[i].strip_prefix("@@ ") {
          change_context = Some(ctx.to_string());
          i += 1;
        } else if !chunks.is_empty() {
          return Err(at_line(
            format!(
              "Expected update hunk to start with a @@ context marker, got: '{}'",
              body[i]
            ),
            line_no(i),
          ));
        }
        let mut chunk = Chunk {
          change_context,
          old_lines: Vec::new(),
          new_lines: Vec::new(),
          ops: Vec::new(),
          is_end_of_file: false,
        };
        let mut parsed = 0;
        while i < body.len() {
          let line = body[i];
          if line == EOF_MARK {
            if parsed == 0 {
              return Err(at_line(
                "Update hunk does not contain any lines".into(),
                line_no(i),
              ));
            }
            chunk.is_end_of_file = true;
            i += 1;
            break;
          }
          if line.is_empty() || line.starts_with(' ') {
            let text = line.get(1..).unwrap_or("").to_string();
            chunk.old_lines.push(text.clone());
            chunk.new_lines.push(text.clone());
            chunk.ops.push((Op::Context, text));
          } else if let Some(text) = line.strip_prefix('-') {
            chunk.old_lines.push(text.to_string());
            chunk.ops.push((Op::Remove, text.to_string()));
          } else if let Some(text) = line.strip_prefix('+') {
            chunk.new_lines.push(text.to_string());
            chunk.ops.push((Op::Add, text.to_string()));
          } else {
            if parsed == 0 {
              return Err(at_line(
                format!(
                  "Unexpected line found in update hunk: '{line}'. Every line should start with ' ' (context line), '+' (added line), or '-' (removed line)"
                ),
                line_no(i),
              ));
            }
            break;
          }
          parsed += 1;
          i += 1;
        }
        if parsed == 0 {
          return Err(at_line(
            "Update hunk does not contain any lines".into(),
            line_no(i),
          ));
        }
        chunks.push(chunk);
      }
      if chunks.is_empty() {
        return Err(at_line(
          format!("Update file hunk for path '{path}' is empty"),
          line_no(start),
        ));
      }
      hunks.push(Hunk::Update {
        path,
        move_path,
        chunks,
      });
      continue;
    }
    return Err(at_line(
      format!(
        "'{header}' is not a valid hunk header. Valid hunk headers: '*** Add File: {{path}}', '*** Delete File: {{path}}', '*** Update File: {{path}}'"
      ),
      line_no(i),
    ));
  }
  Ok(hunks)
}

/// Typographic punctuation and spaces as their ASCII forms, after trimming.
fn normalize_line(l: &str) -> String {
  js_trim(l)
    .chars()
    .map(|c| match c {
      '\u{2010}'..='\u{2015}' | '\u{2212}' => '-',
      '\u{2018}'..='\u{201B}' => '\'',
      '\u{201C}'..='\u{201F}' => '"',
      '\u{00A0}' | '\u{2002}'..='\u{200A}' | '\u{202F}' | '\u{205F}' | '\u{3000}' => ' ',
      c => c,
    })
    .collect()
}

/// Finds `pattern` in `lines` from `start` (at the end only, with `eof`): exactly, then ignoring
/// trailing, then surrounding whitespace, then punctuation.
pub fn seek_sequence<S: AsRef<str>>(lines: &[S], pattern: &[S], start: usize, eof: bool) -> Option<usize> {
  if pattern.is_empty() {
    return Some(start);
  }
  if pattern.len() > lines.len() {
    return None;
  }
  let last = lines.len() - pattern.len();
  let from = if eof { last } else { start };
  let passes: [fn(&str) -> String; 4] = [
    |l| l.to_string(),
    |l| l.trim_end().to_string(),
    |l| js_trim(l).to_string(),
    normalize_line,
  ];
  for f in passes {
    let want: Vec<String> = pattern.iter().map(|p| f(p.as_ref())).collect();
    for i in from..=last {
      if want
        .iter()
        .enumerate()
        .all(|(j, w)| f(lines[i + j].as_ref()) == *w)
      {
        return Some(i);
      }
    }
  }
  None
}

/// The new content of a file after its update chunks.
pub fn apply_chunks(original: &str, chunks: &[Chunk], path: &str) -> Result<String, String> {
  let mut lines: Vec<&str> = original.split('\n').collect();
  if lines.last() == Some(&"") {
    lines.pop();
  }
  let mut replacements: Vec<(usize, usize, Vec<String>)> = Vec::new();
  let mut cursor = 0;
  for chunk in chunks {
    if let Some(ctx) = &chunk.change_context {
      let Some(at) = seek_sequence(&lines, &[ctx.as_str()], cursor, false) else {
        return Err(format!(
          "{path}: Failed to find context '{ctx}' in {path} searched from line {}. Read the file to verify current content before retrying.",
          cursor + 1
        ));
      };
      cursor = at + 1;
    }
    if chunk.old_lines.is_empty() {
      replacements.push((lines.len(), 0, chunk.new_lines.clone()));
      continue;
    }
    let mut old: Vec<&str> = chunk.old_lines.iter().map(String::as_str).collect();
    let mut ops: Vec<(Op, &str)> = chunk.ops.iter().map(|(k, t)| (*k, t.as_str())).collect();
    let mut at = seek_sequence(&lines, &old, cursor, chunk.is_end_of_file);
    if at.is_none() && old.last() == Some(&"") {
      // A trailing blank context line that the file does not have (the end of the file).
      old.pop();
      if let Some(last) = ops.iter().rposition(|(k, _)| *k != Op::Add) {
        if ops[last].1.is_empty() {
          ops.remove(last);
        }
      }
      at = seek_sequence(&lines, &old, cursor, chunk.is_end_of_file);
    }
    let Some(at) = at else {
      return Err(format!(
        "{path}: Failed to find expected lines in {path} searched from line {}:\n{}\nRead the file to verify current content before retrying.",
        cursor + 1,
        chunk.old_lines.join("\n")
      ));
    };
    // Context lines keep the file's own text (a whitespace-fuzzy match must not rewrite them).
    let mut replacement = Vec::new();
    let mut k = at;
    for (kind, text) in &ops {
      match kind {
        Op::Context => {
          replacement.push(lines.get(k).copied().unwrap_or("").to_string());
          k += 1;
        }
        Op::Remove => k += 1,
        Op::Add => replacement.push(text.to_string()),
      }
    }
    replacements.push((at, old.len(), replacement));
    cursor = at + old.len();
  }
  replacements.sort_by_key(|r| r.0);
  let mut out: Vec<String> = Vec::with_capacity(lines.len());
  let mut pos = 0;
  for (at, len, new) in replacements {
    if at < pos {
      return Err(format!("{path}: overlapping hunks at line {}", at + 1));
    }
    out.extend(lines[pos..at].iter().map(|l| l.to_string()));
    out.extend(new);
    pos = at + len;
  }
  out.extend(lines[pos.min(lines.len())..].iter().map(|l| l.to_string()));
  if out.last().is_none_or(|l| !l.is_empty()) {
    out.push(String::new());
  }
  Ok(out.join("\n"))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
  Added,
  Modified,
  Deleted,
}

impl Status {
  pub fn as_str(self) -> &'static str {
    match self {
      Status::Added => "added",
      Status::Modified => "modified",
      Status::Deleted => "deleted",
    }
  }
}

/// The final state of one touched file: its key, the path as the patch named it, and its new
/// content (`None`: deleted).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Final {
  pub key: String,
  pub path: String,
  pub content: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
  /// In the order the files were first touched.
  pub writes: Vec<Final>,
  /// One entry per hunk, as the tool reports it.
  pub files: Vec<(Status, String)>,
}

impl Plan {
  pub fn message(&self) -> String {
    match self.files.as_slice() {
      [(_, path)] => format!("Successfully patched {path}"),
      files => format!("Successfully patched {} files", files.len()),
    }
  }
}

/// Plans `hunks` against the files as they are: `disk[key]` is a file's content (`None`: no such
/// file, or a directory), `key_of` maps a patch path to the key two spellings of one file share.
/// `max_bytes` refuses files that would grow past it. Nothing is written; the error is the
/// message bashkit's tool returns.
pub fn plan(
  hunks: &[Hunk],
  key_of: &dyn Fn(&str) -> String,
  disk: &HashMap<String, Option<String>>,
  max_bytes: Option<u64>,
) -> Result<Plan, String> {
  let mut writes: Vec<Final> = Vec::new();
  let mut files = Vec::new();
  let too_big = |content: &str| max_bytes.is_some_and(|m| content.len() as u64 > m);
  fn current<'a>(
    writes: &'a [Final],
    disk: &'a HashMap<String, Option<String>>,
    key: &str,
  ) -> Option<&'a str> {
    match writes.iter().find(|w| w.key == key) {
      Some(w) => w.content.as_deref(),
      None => disk.get(key).and_then(|c| c.as_deref()),
    }
  }
  fn set(writes: &mut Vec<Final>, key: String, path: &str, content: Option<String>) {
    match writes.iter_mut().find(|w| w.key == key) {
      // A file touched again keeps its place in the write order.
      Some(w) => {
        w.path = path.to_string();
        w.content = content;
      }
      None => writes.push(Final {
        key,
        path: path.to_string(),
        content,
      }),
    }
  }
  let max = max_bytes.unwrap_or(0);
  for h in hunks {
    match h {
      Hunk::Add { path, content } => {
        if too_big(content) {
          return Err(format!(
            "File too large: {path} ({} bytes, max {max})",
            content.len()
          ));
        }
        set(&mut writes, key_of(path), path, Some(content.clone()));
        files.push((Status::Added, path.clone()));
      }
      Hunk::Delete { path } => {
        let key = key_of(path);
        if current(&writes, disk, &key).is_none() {
          return Err(format!("File not found for deletion: {path}"));
        }
        set(&mut writes, key, path, None);
        files.push((Status::Deleted, path.clone()));
      }
      Hunk::Update {
        path,
        move_path,
        chunks,
      } => {
        let key = key_of(path);
        let Some(original) = current(&writes, disk, &key) else {
          return Err(format!("File not found: {path}"));
        };
        let updated = apply_chunks(original, chunks, path)?;
        if too_big(&updated) {
          return Err(format!(
            "File too large after patch: {path} ({} bytes, max {max})",
            updated.len()
          ));
        }
        match move_path
          .as_ref()
          .map(|m| (m, key_of(m)))
          .filter(|(_, k)| *k != key)
        {
          Some((target, target_key)) => {
            if current(&writes, disk, &target_key).is_some() {
              return Err(format!("Move target already exists: {target}"));
            }
            set(&mut writes, key, path, None);
            set(&mut writes, target_key, target, Some(updated));
            files.push((Status::Modified, target.clone()));
          }
          None => {
            set(&mut writes, key, path, Some(updated));
            files.push((Status::Modified, path.clone()));
          }
        }
      }
    }
  }
  Ok(Plan { writes, files })
}

#[cfg(test)]
mod tests {
  use super::*;

  #[test]
  fn parse_errors_carry_line_numbers() {
    assert_eq!(
      parse("nothing").unwrap_err(),
      "The first line of the patch must be '*** Begin Patch'"
    );
    assert_eq!(
      parse("*** Begin Patch\n*** Add File: a").unwrap_err(),
      "The last line of the patch must be '*** End Patch'"
    );
    assert_eq!(
      parse("*** Begin Patch\n*** Update File: a\nbad\n*** End Patch").unwrap_err(),
      "Line 3: Unexpected line found in update hunk: 'bad'. Every line should start with ' ' (context line), '+' (added line), or '-' (removed line)"
    );
    assert_eq!(
      parse("*** Begin Patch\n*** Update File: a\n*** End Patch").unwrap_err(),
      "Line 2: Update file hunk for path 'a' is empty"
    );
    assert_eq!(
      parse("<<'EOF'\n*** Begin Patch\n*** Delete File: x\n*** End Patch\nEOF")
        .unwrap()
        .len(),
      1
    );
  }

  #[test]
  fn seek_passes() {
    let lines = ["a  ", "  b", "“q” – x"];
    assert_eq!(seek_sequence(&lines, &["a"], 0, false), Some(0));
    assert_eq!(seek_sequence(&lines, &["b"], 0, false), Some(1));
    assert_eq!(seek_sequence(&lines, &["\"q\" - x"], 0, false), Some(2));
    assert_eq!(seek_sequence(&lines, &["zz"], 0, false), None);
  }
}
