//! `read_file`: numbered lines, optional offset/limit, head-capped. A file of at most
//! `INLINE_READ_MAX_BYTES` is read on the calling thread; a larger one is streamed on the
//! blocking pool, so memory is bounded by what the cap and the store can use, not by the file.

use std::io::{BufRead, Read};
use std::os::unix::fs::FileTypeExt;
use std::path::Path;

use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::args::Args;
use super::{aborted, blocking, ShellToolName, ShellTools, ToolOutput};
use crate::cap::{cap_tool_output, CapRequest, Direction};
use crate::error::{Caveman, ToolError};
use crate::limits::{INLINE_READ_MAX_BYTES, STORE_ENTRY_MAX_BYTES};
use crate::lines::{scan, LineSink, LossyDecoder};

pub(super) async fn run(
  tools: &ShellTools,
  input: &Value,
  cancel: CancellationToken,
) -> Result<ToolOutput, ToolError> {
  let args = Args::new("read_file", input)?;
  let path = args.string("path")?.to_string();
  // The reference's `max(1, offset ?? 1)` and `max(1, limit)`: 0 and negatives read from the
  // first line / one line. Non-integers are refused (the schema says integer).
  let offset = args.opt_integer("offset")?.unwrap_or(1.0).max(1.0);
  let limit = args.opt_integer("limit")?.map(|f| f.max(1.0));
  let cap = tools.cap(ShellToolName::ReadFile);
  let keep = if tools.store().is_some() {
    cap.max(STORE_ENTRY_MAX_BYTES)
  } else {
    cap
  };
  if !tools.is_local() {
    return run_remote(tools, path, offset as u64, limit.map(|l| l as u64), keep, cancel).await;
  }
  let (resolved, file) = tools.workspace().resolve_open_read_async(&path, "stat").await?;
  // fstat of an open descriptor does not wait on the disk: done here, before choosing a path.
  let meta = file
    .metadata()
    .map_err(|e| ToolError::from_io(&e, "stat", &resolved.abs))?;
  let ft = meta.file_type();
  if !ft.is_file() || ft.is_fifo() {
    return Err(ToolError::caveman(Caveman::NotAFile(path)));
  }
  let (offset, limit) = (offset as u64, limit.map(|l| l as u64));
  let mut head = Vec::new();
  if meta.len() <= INLINE_READ_MAX_BYTES {
    // A small file is read and numbered on the calling thread: no blocking-pool hop. It is read
    // as far as its `fstat` size, with no end-of-file read (as grep reads): a file growing
    // meanwhile is shown as it was when opened. A size of 0 (what `/proc` reports for files with
    // content) reads to the real end.
    if meta.len() > 0 {
      head.resize(meta.len() as usize, 0);
      let n = read_full(&file, &mut head).map_err(read_error(&path, &resolved.abs))?;
      head.truncate(n);
    } else {
      (&file)
        .take(INLINE_READ_MAX_BYTES + 1)
        .read_to_end(&mut head)
        .map_err(read_error(&path, &resolved.abs))?;
    }
    if head.len() as u64 <= INLINE_READ_MAX_BYTES {
      let numbered = number_lines(
        &head[..],
        offset,
        limit,
        keep,
        &cancel,
        &read_error(&path, &resolved.abs),
      )?;
      return Ok(finish(tools, &path, numbered));
    }
    // The file grew past the inline size while it was read: what was read is kept and the
    // rest streams on the pool, as for a large file.
  }
  let shown = path.clone();
  let numbered = blocking(move || {
    let reader = crate::lines::buffered(std::io::Cursor::new(head).chain(file));
    number_lines(
      reader,
      offset,
      limit,
      keep,
      &cancel,
      &read_error(&shown, &resolved.abs),
    )
  })
  .await?;
  Ok(finish(tools, &path, numbered))
}

/// Reads until `buf` is full or the file ends; the bytes read.
fn read_full(mut file: &std::fs::File, buf: &mut [u8]) -> std::io::Result<usize> {
  let mut n = 0;
  while n < buf.len() {
    match file.read(&mut buf[n..]) {
      Ok(0) => break,
      Ok(k) => n += k,
      Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
      Err(e) => return Err(e),
    }
  }
  Ok(n)
}

/// A read error of `read_file`: `EISDIR` (a directory that passed as a file) is `not a file`.
fn read_error<'a>(shown: &'a str, abs: &'a Path) -> impl Fn(std::io::Error) -> ToolError + 'a {
  move |e| match e.raw_os_error() {
    Some(libc::EISDIR) => ToolError::caveman(Caveman::NotAFile(shown.to_string())),
    _ => ToolError::from_io(&e, "read", abs),
  }
}

fn finish(tools: &ShellTools, path: &str, numbered: Numbered) -> ToolOutput {
  let label = format!("read_file:{path}");
  let recovery = tools.recovery();
  let text = cap_tool_output(CapRequest {
    text: numbered.kept,
    total: numbered.total,
    max_bytes: tools.cap(ShellToolName::ReadFile),
    direction: Direction::Head,
    label: &label,
    complete: true,
    recovery,
  });
  ToolOutput {
    text,
    label: Some(label),
  }
}

/// On a non-local backend: `readFile(abs)` with no `maxBytes`, the path assumed a file; an
/// `EISDIR` from the backend is `not a file`, every other error passes through.
async fn run_remote(
  tools: &ShellTools,
  path: String,
  offset: u64,
  limit: Option<u64>,
  keep: usize,
  cancel: CancellationToken,
) -> Result<ToolOutput, ToolError> {
  let abs = tools.workspace().resolve_lexical(&path)?;
  let bytes = match tools
    .backend
    .read_file(abs.to_string_lossy().into_owned(), None)
    .await
  {
    Err(e) if e.code == "EISDIR" => return Err(ToolError::caveman(Caveman::NotAFile(path))),
    other => other?,
  };
  let inline = bytes.len() as u64 <= INLINE_READ_MAX_BYTES;
  let number = move || {
    number_lines(&bytes[..], offset, limit, keep, &cancel, &|e| {
      ToolError::from_io(&e, "read", &abs)
    })
  };
  // The bytes are in memory already; only numbering a large file is worth a pool hop.
  let numbered = if inline {
    number()?
  } else {
    blocking(number).await?
  };
  Ok(finish(tools, &path, numbered))
}

/// The numbered text: its first `keep` bytes and its whole length.
pub(crate) struct Numbered {
  pub kept: Vec<u8>,
  pub total: usize,
}

/// The `read_file` printer over the one line reader: lines `offset..offset+limit` (1-based) as
/// `<n>\t<line>` joined by `\n`, decoded as UTF-8 (invalid bytes become U+FFFD, as Node's
/// decoder does); the first `keep` bytes are kept, all of them counted.
struct NumberedSink<'a> {
  offset: u64,
  end: Option<u64>,
  kept: Vec<u8>,
  keep: usize,
  total: usize,
  /// Whether the current line's `<n>\t` was written.
  line_open: bool,
  decoder: LossyDecoder,
  decoded: String,
  cancel: &'a CancellationToken,
  cancelled: bool,
}

impl NumberedSink<'_> {
  fn push(&mut self, s: &[u8]) {
    self.total += s.len();
    let room = self.keep.saturating_sub(self.kept.len());
    if room > 0 {
      self.kept.extend_from_slice(&s[..room.min(s.len())]);
    }
  }

  fn selected(&self, line: u64) -> bool {
    line >= self.offset && self.end.is_none_or(|e| line < e)
  }

  fn open(&mut self, line: u64) {
    if !self.line_open {
      if line > self.offset {
        self.push(b"\n");
      }
      // `<n>\t`, written without an allocation per line.
      let mut digits = [0u8; 21];
      let mut at = digits.len() - 1;
      digits[at] = b'\t';
      let mut n = line;
      loop {
        at -= 1;
        digits[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
          break;
        }
      }
      self.push(&digits[at..]);
      self.line_open = true;
    }
  }

  fn flush(&mut self) {
    let text = std::mem::take(&mut self.decoded);
    self.push(text.as_bytes());
    self.decoded = text;
    self.decoded.clear();
  }
}

impl LineSink for NumberedSink<'_> {
  fn chunk(&mut self, _bytes: &[u8]) -> bool {
    self.cancelled = self.cancel.is_cancelled();
    !self.cancelled
  }

  fn piece(&mut self, line: u64, bytes: &[u8]) -> bool {
    let n = line + 1;
    if self.selected(n) {
      self.open(n);
      if self.decoder.is_idle() && std::str::from_utf8(bytes).is_ok() {
        // The common case, valid UTF-8 with nothing held: no decoding copy.
        self.push(bytes);
      } else {
        self.decoder.push(bytes, &mut self.decoded);
        self.flush();
      }
    }
    true
  }

  fn end_line(&mut self, line: u64) -> bool {
    let n = line + 1;
    if self.selected(n) {
      self.open(n);
      self.decoder.finish(&mut self.decoded);
      self.flush();
    }
    self.line_open = false;
    // Past the selected range: the rest need not be read.
    self.end.is_none_or(|e| n + 1 < e)
  }
}

/// Streams `reader` and renders lines `offset..offset+limit` as `<n>\t<line>` joined by `\n`.
pub(crate) fn number_lines(
  reader: impl BufRead,
  offset: u64,
  limit: Option<u64>,
  keep: usize,
  cancel: &CancellationToken,
  read_error: &dyn Fn(std::io::Error) -> ToolError,
) -> Result<Numbered, ToolError> {
  let mut sink = NumberedSink {
    offset,
    end: limit.map(|l| offset.saturating_add(l)),
    kept: Vec::with_capacity(keep.min(64 * 1024)),
    keep,
    total: 0,
    line_open: false,
    decoder: LossyDecoder::default(),
    decoded: String::new(),
    cancel,
    cancelled: false,
  };
  scan(reader, &mut sink).map_err(read_error)?;
  if sink.cancelled {
    return Err(aborted());
  }
  Ok(Numbered {
    kept: sink.kept,
    total: sink.total,
  })
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
    let r = std::io::BufReader::new(Two(vec![&euro[..1], &euro[1..]]));
    let n = number_lines(r, 1, None, usize::MAX, &CancellationToken::new(), &io_err).unwrap();
    assert_eq!(String::from_utf8(n.kept).unwrap(), "1\t€");
    let r = std::io::BufReader::new(Two(vec![&euro[..2]]));
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
