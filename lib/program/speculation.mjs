// Streaming speculation of programmatic reads (caveman-code.md §3.7), the JS half: a provider
// stream is wrapped so the kernel sees the source of its first cell-tool call as it grows. The
// kernel (knap_core::kernel::speculation) finds the literal read calls in it, admits and
// launches them, and lets the cell claim them; this only carries the text.

/** The programmatic cell tools (`createProgrammaticToolRuntime`), with their runtime's state. */
export const PROGRAM_CELLS = new WeakMap();

/**
 * `streamFn` with its streams watched: `report(contentIndex, name, code, endId)` is called with
 * the first call of a tool in `cellNames` (in content order) whenever its `code` may hold a new
 * complete call (a `)` arrived), and once more with the call's id when it is complete.
 */
export function watchCellStream(streamFn, cellNames, report) {
  const names = new Set(cellNames);
  return (model, context, options) => {
    const made = streamFn(model, context, options);
    if (made !== null && typeof made === "object" && typeof made.then === "function") return made.then((stream) => watched(stream, names, report));
    return watched(made, names, report);
  };
}

function watched(stream, names, report) {
  if (stream === null || stream === undefined || typeof stream[Symbol.asyncIterator] !== "function") return stream;
  let index; // content index of the watched call
  let reported = 0; // length of the source last shown
  const observe = (event) => {
    if (event?.type !== "toolcall_delta" && event?.type !== "toolcall_end") return;
    const i = event.contentIndex;
    const content = event.partial?.content;
    if (!Number.isInteger(i) || !Array.isArray(content)) return;
    const part = event.type === "toolcall_end" && event.toolCall ? event.toolCall : content[i];
    if (part?.type !== "toolCall" || !names.has(part.name)) return;
    if (index === undefined) {
      // Only the first cell call in content order, with every earlier slot present.
      for (let k = 0; k < i; k += 1) {
        const earlier = content[k];
        if (earlier === undefined || earlier === null) return;
        if (earlier.type === "toolCall" && names.has(earlier.name)) return;
      }
      index = i;
    }
    if (i !== index) return;
    const code = part.arguments?.code;
    if (typeof code !== "string") return;
    const end = event.type === "toolcall_end";
    // A call is complete only once its `)` has arrived.
    if (!end && code.indexOf(")", Math.min(reported, code.length)) === -1) return;
    reported = code.length;
    try {
      report(i, part.name, code, end ? String(part.id ?? "") : null);
    } catch {
      // Speculation only ever saves time: a failure to report leaves the call to run normally.
    }
  };
  const source = {
    [Symbol.asyncIterator]() {
      const it = stream[Symbol.asyncIterator]();
      return {
        next(...args) {
          return Promise.resolve(it.next(...args)).then((step) => {
            if (step && !step.done) observe(step.value);
            return step;
          });
        },
        return(value) {
          return typeof it.return === "function" ? it.return(value) : Promise.resolve({ done: true, value });
        },
      };
    },
  };
  if (typeof stream.result === "function") source.result = () => stream.result();
  return source;
}
