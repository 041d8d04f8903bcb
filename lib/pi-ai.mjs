// Lazy access to the optional peer `@mariozechner/pi-ai` (model catalog and HTTP transport).
// Nothing in knap imports it eagerly: a user who only wants the tools never needs it installed.

export const PI_AI_PACKAGE = "@mariozechner/pi-ai";

let cached;

/** The message of the error thrown when pi-ai is needed but not installed. */
export function piAiMissingMessage(purpose) {
  return (
    `caveman agent: ${purpose} needs the optional package ${PI_AI_PACKAGE}, which is not installed; ` +
    `run \`npm install ${PI_AI_PACKAGE}\` (or pass a Model object and RunOptions.streamFn / RunOptions.models)`
  );
}

function isMissingPiAi(error) {
  return (
    error &&
    (error.code === "ERR_MODULE_NOT_FOUND" || error.code === "MODULE_NOT_FOUND") &&
    String(error.message).includes(PI_AI_PACKAGE)
  );
}

/**
 * Import pi-ai once. `importer` exists for tests (it replaces the dynamic import).
 * Rejects with a clear `npm install @mariozechner/pi-ai` error when the package is absent.
 */
export async function loadPiAi(purpose = "this", importer) {
  if (importer) return wrapImport(importer(), purpose);
  if (!cached) {
    cached = import(PI_AI_PACKAGE);
    cached.catch(() => {
      cached = undefined;
    });
  }
  return wrapImport(cached, purpose);
}

async function wrapImport(promise, purpose) {
  try {
    return await promise;
  } catch (error) {
    if (isMissingPiAi(error)) {
      const wrapped = new Error(piAiMissingMessage(purpose), { cause: error });
      wrapped.code = "knap_pi_ai_missing";
      throw wrapped;
    }
    throw error;
  }
}
