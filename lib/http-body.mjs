// Reading a fetch body (a Response's or a Request's) under a byte cap: the one reader of the
// durable HTTP store, the HTTP execution backend, `serve`'s request bodies and WebFetch.

/**
 * Up to `max` bytes of `message.body`, and whether there was more: the stream is read chunk by
 * chunk and cancelled once past `max`, so a large body is never held whole. A message without
 * a stream reader (a test double) is read whole first.
 */
export async function readCapped(message, max) {
  const body = message.body;
  if (!body || typeof body.getReader !== "function") {
    const all = Buffer.from(
      typeof message.arrayBuffer === "function" ? await message.arrayBuffer() : typeof message.text === "function" ? await message.text() : "",
    );
    return { bytes: all.subarray(0, max), truncated: all.length > max };
  }
  const reader = body.getReader();
  const chunks = [];
  let total = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    total += value.byteLength;
    chunks.push(value);
    if (total > max) {
      reader.cancel().catch(() => {});
      return { bytes: Buffer.concat(chunks, total).subarray(0, max), truncated: true };
    }
  }
  return { bytes: Buffer.concat(chunks, total), truncated: false };
}
