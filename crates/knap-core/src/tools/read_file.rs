//! `read_file`: numbered lines, optional offset/limit, head-capped. The file is streamed, so
//! memory is bounded by what the cap and the store can use, not by the file.

use std::io::Read;
use std::os::unix::fs::FileTypeExt;

use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::args::Args;
use super::{aborted, blocking, ShellToolName, ShellTools, ToolOutput};
use crate::cap::{cap_tool_output, CapRequest, Direction};
use crate::error::{Caveman, ToolError};
use crate::limits::{READ_CHUNK_BYTES, STORE_ENTRY_MAX_BYTES};

pub(super) async fn run(
  tools: &ShellTools,
  input: &Value,
  cancel: CancellationToken,
) -> Result<ToolOutput, ToolError> {
  let args = Args::new("read_file", input)?;
  let path = args.string("path")?.to_string();
  let offset = args
    .opt_number("offset")?
    .map(|f| f.floor())
    .unwrap_or(1.0)
    .max(1.0);
  let limit = args.opt_number("limit")?.map(|f| f.floor().max(1.0));
  let resolved = tools.workspace().resolve(&path)?;
  let file = tools.workspace().open_read(&path, &resolved, "stat")?;
  let cap = tools.cap(ShellToolName::ReadFile);
  let keep = if tools.store().is_some() {
    cap.max(STORE_ENTRY_MAX_BYTES)
  } else {
    cap
  };
  let shown = path.clone();
  let numbered = blocking(move || {
    let meta = file
      .metadata()
      .map_err(|e| ToolError::from_io(&e, "stat", &resolved.abs))?;
    let ft = meta.file_type();
    if !ft.is_file() || ft.is_fifo() {
      return Err(ToolError::caveman(Caveman::NotAFile(shown)));
    }
    let read_error = |e: std::io::Error| match e.raw_os_error() {
      Some(libc::EISDIR) => ToolError::caveman(Caveman::NotAFile(shown.clone())),
      _ => ToolError::from_io(&e, "read", &resolved.abs),
    };
    number_lines(
      file,
      offset as u64,
      limit.map(|l| l as u64),
      keep,
      &cancel,
      &read_error,
    )
  })
  .await?;
  let label = format!("read_file:{path}");
  let recovery = tools.recovery();
  let text = cap_tool_output(CapRequest {
    text: numbered.kept,
    total: numbered.total,
    max_bytes: cap,
    direction: Direction::Head,
    label: &label,
    complete: true,
    recovery,
  });
  Ok(ToolOutput {
    text,
    label: Some(label),
  })
}

/// The numbered text: its first `keep` bytes and its whole length.
pub(crate) struct Numbered {
  pub kept: Vec<u8>,
  pub total: usize,
}

struct Sink {
  kept: Vec<u8>,
  keep: usize,
  total: usize,
}

impl Sink {
  fn push(&mut self, s: &[u8]) {
    self.total += s.len();
    let room = self.keep.saturating_sub(self.kept.len());
    if room > 0 {
      self.kept.extend_from_slice(&s[..room.min(s.len())]);
    }
  }
}

/// Streams `reader`, decodes it as UTF-8 (invalid bytes become U+FFFD, as Node's decoder does),
/// and renders lines `offset..offset+limit` as `<n>\t<line>` joined by `\n`.
pub(crate) fn number_lines(
  mut reader: impl Read,
  offset: u64,
  limit: Option<u64>,
  keep: usize,
  cancel: &CancellationToken,
  read_error: &dyn Fn(std::io::Error) -> ToolError,
) -> Result<Numbered, ToolError> {
  let end = limit.map(|l| offset.saturating_add(l));
  let mut sink = Sink {
    kept: Vec::with_capacity(keep.min(64 * 1024)),
    keep,
    total: 0,
  };
  let mut line: u64 = 1;
  let mut line_open = false; // whether the current selected line's prefix was written
  let mut carry: Vec<u8> = Vec::new();
  let mut buf = vec![0u8; READ_CHUNK_BYTES];
  let mut decoded = String::new();
  let selected = |n: u64| n >= offset && end.is_none_or(|e| n < e);

  let emit = |text: &str, line: &mut u64, line_open: &mut bool, sink: &mut Sink| -> bool {
    // Returns false once past the selected range.
    let mut rest = text;
    loop {
      if end.is_some_and(|e| *line >= e) {
        return false;
      }
      let (piece, newline) = match rest.find('\n') {
        Some(i) => (&rest[..i], true),
        None => (rest, false),
      };
      if selected(*line) {
        if !*line_open {
          if *line > offset {
            sink.push(b"\n");
          }
          sink.push(format!("{line}\t").as_bytes());
          *line_open = true;
        }
        sink.push(piece.as_bytes());
      }
      if !newline {
        return true;
      }
      *line += 1;
      *line_open = false;
      rest = &rest[piece.len() + 1..];
    }
  };

  loop {
    if cancel.is_cancelled() {
      return Err(aborted());
    }
    let n = match reader.read(&mut buf) {
      Ok(n) => n,
      Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
      Err(e) => return Err(read_error(e)),
    };
    let eof = n == 0;
    carry.extend_from_slice(&buf[..n]);
    decoded.clear();
    let consumed = decode_lossy(&carry, eof, &mut decoded);
    carry.drain(..consumed);
    if !emit(&decoded, &mut line, &mut line_open, &mut sink) {
      break;
    }
    if eof {
      // The last line (possibly empty) still counts: "a\nb\n" has a third, empty line.
      emit("", &mut line, &mut line_open, &mut sink);
      break;
    }
  }
  Ok(Numbered {
    kept: sink.kept,
    total: sink.total,
  })
}

/// Appends the decodable part of `bytes` to `out` and returns how many bytes it consumed. An
/// incomplete sequence at the end is left for the next chunk unless `eof`.
fn decode_lossy(bytes: &[u8], eof: bool, out: &mut String) -> usize {
  let mut consumed = 0;
  for chunk in bytes.utf8_chunks() {
    out.push_str(chunk.valid());
    consumed += chunk.valid().len();
    let invalid = chunk.invalid();
    if invalid.is_empty() {
      continue;
    }
    let at_end = consumed + invalid.len() == bytes.len();
    if at_end && !eof && invalid.len() < 4 {
      return consumed;
    }
    out.push('\u{FFFD}');
    consumed += invalid.len();
  }
  consumed
}

#[cfg(test)]
mod tests {
  use super::*;

  fn io_err(e: std::io::Error) -> ToolError {
    ToolError::from_io(&e, "read", std::path::Path::new("/t"))
  }

  fn render(text: &[u8], offset: u64, limit: Option<u64>) -> String {
    let n = number_lines(
      text,
      offset,
      limit,
      usize::MAX,
      &CancellationToken::new(),
      &io_err,
    )
    .unwrap();
    assert_eq!(n.kept.len(), n.total);
    String::from_utf8(n.kept).unwrap()
  }

  #[test]
  fn numbering_matches_reference() {
    assert_eq!(render(b"a\nb\n", 1, None), "1\ta\n2\tb\n3\t");
    assert_eq!(render(b"alpha\nbeta\ngamma", 2, Some(1)), "2\tbeta");
    assert_eq!(render(b"", 1, None), "1\t");
    assert_eq!(render(b"a\nb", 5, None), "");
    assert_eq!(render(b"a\nb\nc", 2, None), "2\tb\n3\tc");
  }

  #[test]
  fn invalid_utf8_and_split_characters() {
    assert_eq!(render(b"a\xffb", 1, None), "1\ta\u{FFFD}b");
    // A 3-byte character split across reads decodes whole.
    struct Two<'a>(Vec<&'a [u8]>);
    impl Read for Two<'_> {
      fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.0.is_empty() {
          return Ok(0);
        }
        let part = self.0.remove(0);
        buf[..part.len()].copy_from_slice(part);
        Ok(part.len())
      }
    }
    let euro = "€".as_bytes();
    let r = Two(vec![&euro[..1], &euro[1..]]);
    let n = number_lines(r, 1, None, usize::MAX, &CancellationToken::new(), &io_err).unwrap();
    assert_eq!(String::from_utf8(n.kept).unwrap(), "1\t€");
    let r = Two(vec![&euro[..2]]);
    let n = number_lines(r, 1, None, usize::MAX, &CancellationToken::new(), &io_err).unwrap();
    assert_eq!(String::from_utf8(n.kept).unwrap(), "1\t\u{FFFD}");
  }

  #[test]
  fn keeps_only_a_prefix_but_counts_everything() {
    let text = "x\n".repeat(10_000);
    let n = number_lines(text.as_bytes(), 1, None, 100, &CancellationToken::new(), &io_err).unwrap();
    assert_eq!(n.kept.len(), 100);
    let full = render(text.as_bytes(), 1, None);
    assert_eq!(n.total, full.len());
    assert_eq!(&full.as_bytes()[..100], &n.kept[..]);
  }
}
