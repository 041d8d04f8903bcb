// Errors that say what to do, with nothing else imported (definition.mjs uses it too).

/**
 * knap keeps the reference's first message line and puts what to do on a second line,
 * `hint: …`; this also sets `error.hint` to that text. Returns the error.
 */
export function withHint(error, hint) {
  if (!error || typeof error !== "object") return error;
  if (hint !== undefined && !String(error.message).includes("\nhint: ")) error.message = `${error.message}\nhint: ${hint}`;
  const at = typeof error.message === "string" ? error.message.indexOf("\nhint: ") : -1;
  if (at >= 0) Object.defineProperty(error, "hint", { value: error.message.slice(at + 7), enumerable: true, writable: true, configurable: true });
  return error;
}
