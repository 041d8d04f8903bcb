//! The journal writer: `emit` turns a record into a line and queues it, `flush` appends the
//! queue as one store call. A failed append is sticky: every later flush fails with it, so no
//! run goes on over a hole. Reading and replay live in `record` and `replay`.

use std::sync::Arc;

use super::record::Record;
use super::store::DurableStore;
use super::DurableError;
use crate::code::Code;
use crate::limits::{DURABLE_MAX_EVENT_BYTES, DURABLE_MAX_JOURNAL_BYTES, DURABLE_MAX_JOURNAL_EVENTS};

pub use super::record::{event, iso_from_ms, iso_now, parse_lines};
pub use super::replay::{analyze, Expected, JournalState, PriorTotals, ResumeState, Settlement, ToolRecord};

pub struct Journal {
  store: Arc<dyn DurableStore>,
  run_id: String,
  queue: Vec<String>,
  failed: Option<DurableError>,
  events: usize,
  bytes: usize,
}

impl Journal {
  pub fn new(
    store: Arc<dyn DurableStore>,
    run_id: &str,
    existing_events: usize,
    existing_bytes: usize,
  ) -> Self {
    Self {
      store,
      run_id: run_id.into(),
      queue: Vec::new(),
      failed: None,
      events: existing_events,
      bytes: existing_bytes,
    }
  }

  pub fn emit(&mut self, record: &Record) -> Result<(), DurableError> {
    let line = record.to_line()?;
    if line.len() > DURABLE_MAX_EVENT_BYTES {
      return Err(DurableError::coded(Code::DurableEventLimit, record.kind()));
    }
    if self.events + 1 > DURABLE_MAX_JOURNAL_EVENTS || self.bytes + line.len() + 1 > DURABLE_MAX_JOURNAL_BYTES
    {
      return Err(DurableError::bare(Code::DurableJournalLimit));
    }
    self.events += 1;
    self.bytes += line.len() + 1;
    self.queue.push(line);
    Ok(())
  }

  fn drain(&mut self) -> String {
    let mut data = String::new();
    for line in self.queue.drain(..) {
      data.push_str(&line);
      data.push('\n');
    }
    data
  }

  pub async fn flush(&mut self) -> Result<(), DurableError> {
    if let Some(e) = &self.failed {
      return Err(e.clone());
    }
    if self.queue.is_empty() {
      return Ok(());
    }
    let data = self.drain();
    match self.store.append(&self.run_id, data).await {
      Ok(()) => Ok(()),
      Err(e) => {
        self.failed = Some(e.clone());
        Err(e)
      }
    }
  }

  pub async fn emit_flush(&mut self, record: &Record<'_>) -> Result<(), DurableError> {
    self.emit(record)?;
    self.flush().await
  }

  /// Events emitted so far (the sequence number of the last one), journaled ones included.
  pub fn emitted(&self) -> usize {
    self.events
  }

  /// For a group commit that appends outside this value's lock: the queued lines as one append,
  /// the store and the run id. `Err` is the sticky failure of an earlier append.
  pub fn take_batch(&mut self) -> Result<Option<(String, Arc<dyn DurableStore>, String)>, DurableError> {
    if let Some(e) = &self.failed {
      return Err(e.clone());
    }
    if self.queue.is_empty() {
      return Ok(None);
    }
    let data = self.drain();
    Ok(Some((data, self.store.clone(), self.run_id.clone())))
  }

  /// Records a failed append: every later flush fails with it.
  pub fn fail(&mut self, e: DurableError) {
    self.failed.get_or_insert(e);
  }
}
