//! One agent run's transcript as the kernel keeps it: what the host has not been sent yet, what
//! the journal has not checkpointed yet, and the sizes the budget's input ceiling reads.

use super::message::{AssistantMessage, Message};

pub(super) struct Transcript {
  /// The host's conversation handle for this agent run.
  pub conversation: u64,
  /// The next provider call is the first (it carries the system prompt and the tools).
  pub first_call: bool,
  /// `turn_start` of the coming turn was already emitted (the first turn opens before the prompt).
  pub turn_open: bool,
  /// The user's prompt is in the transcript already (a resumed durable run).
  pub prompted: bool,
  /// Messages the kernel made that the host has not been sent yet.
  pending: Vec<Message>,
  /// Root of a durable run: messages not yet journaled in a `turn` event.
  unjournaled: Option<Vec<Message>>,
  /// Bytes of JSON of the transcript, kept only under a budget (its input ceiling reads them).
  context_bytes: Option<usize>,
  pub message_count: usize,
  /// The provider-visible context has an image part (the router's `hasImages`).
  pub images: bool,
  pub last_assistant: Option<AssistantMessage>,
  /// The provider-visible context, kept only when this run may compact (a compaction rewrites
  /// it; the host's own transcript and the journal stay append-only).
  context: Option<Vec<Message>>,
  /// The system prompt's and tool schemas' bytes (a compacted context is re-measured on them).
  fixed_bytes: usize,
  /// A compaction's context, sent with the next call (the host replaces what the provider sees).
  replaced: bool,
}

impl Transcript {
  pub fn new(conversation: u64, measure: bool, journaled: bool) -> Self {
    Self {
      conversation,
      first_call: true,
      turn_open: false,
      prompted: false,
      pending: Vec::new(),
      unjournaled: journaled.then(Vec::new),
      context_bytes: measure.then_some(0),
      message_count: 0,
      images: false,
      last_assistant: None,
      context: None,
      fixed_bytes: 0,
      replaced: false,
    }
  }

  /// Measure the context's size (a router reads it), before any message is counted.
  pub fn measure(&mut self) {
    self.context_bytes.get_or_insert(0);
  }

  /// Keep the provider-visible context (a run that may compact).
  pub fn keep_context(&mut self) {
    self.context.get_or_insert_with(Vec::new);
  }

  pub fn fixed_bytes(&self) -> usize {
    self.fixed_bytes
  }

  pub fn context(&self) -> &[Message] {
    self.context.as_deref().unwrap_or_default()
  }

  /// A compaction's result: what the provider sees from the next call on.
  pub fn replace_context(&mut self, messages: Vec<Message>) {
    self.context_bytes = self
      .context_bytes
      .map(|_| self.fixed_bytes + messages.iter().map(Message::json_len).sum::<usize>());
    self.message_count = messages.len();
    self.images = messages.iter().any(super::route::has_image);
    self.context = Some(messages);
    self.replaced = true;
  }

  /// The compacted context for the next call, once.
  pub fn take_replaced(&mut self) -> Option<Vec<Message>> {
    if !std::mem::replace(&mut self.replaced, false) {
      return None;
    }
    self.context.clone()
  }

  /// The system prompt and tool schemas: counted once, and again after every compaction.
  pub fn count_fixed(&mut self, bytes: usize) {
    self.fixed_bytes += bytes;
    self.count_bytes(bytes);
  }

  /// Counts toward the context size (the system prompt and tool schemas, at the start).
  pub fn count_bytes(&mut self, bytes: usize) {
    if let Some(b) = &mut self.context_bytes {
      *b += bytes;
    }
  }

  pub fn context_bytes(&self) -> usize {
    self.context_bytes.unwrap_or(0)
  }

  fn count(&mut self, message: &Message) {
    if self.context_bytes.is_some() {
      self.count_bytes(message.json_len());
    }
    self.message_count += 1;
    self.images = self.images || super::route::has_image(message);
    if let Some(c) = &mut self.context {
      c.push(message.clone());
    }
  }

  /// Earlier messages the host gets ahead of this run's prompt (a conversation's history, a
  /// resumed transcript): already journaled, or never journaled by this run.
  pub fn seed(&mut self, message: Message) {
    self.count(&message);
    self.pending.push(message);
  }

  /// A message the kernel made (the prompt, a tool result): sent to the host with the next call.
  pub fn push(&mut self, message: Message) {
    self.count(&message);
    if let Some(u) = &mut self.unjournaled {
      u.push(message.clone());
    }
    self.pending.push(message);
  }

  /// The assistant message a provider call returned: the host has it already.
  pub fn push_reply(&mut self, message: AssistantMessage) {
    let message = Message::Assistant(message);
    self.count(&message);
    if let Some(u) = &mut self.unjournaled {
      u.push(message.clone());
    }
    let Message::Assistant(a) = message else {
      unreachable!("just built")
    };
    self.last_assistant = Some(a);
  }

  /// The messages to send with the next provider call.
  pub fn take_pending(&mut self) -> Vec<Message> {
    std::mem::take(&mut self.pending)
  }

  /// The messages since the last `turn` checkpoint (`None` unless this is a durable root).
  pub fn take_unjournaled(&mut self) -> Option<Vec<Message>> {
    self.unjournaled.as_mut().map(std::mem::take)
  }
}
