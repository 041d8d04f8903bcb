// Finds knap: the checkout this package sits in (a `file:` link to packages/coding-agent), else
// `@caveman-ai/agent` (knap installed under the reference's name), else `knap`.
import { existsSync } from "node:fs";

const MISSING = new Set(["ERR_MODULE_NOT_FOUND", "ERR_PACKAGE_PATH_NOT_EXPORTED"]);

/** Imports knap's `lib/<file>` (exported as `<subpath>`). */
export async function loadKnap(file, subpath) {
  const checkout = new URL(`../../lib/${file}`, import.meta.url);
  if (existsSync(checkout) && existsSync(new URL("../../packages/coding-agent/load.mjs", import.meta.url))) return import(checkout.href);
  for (const name of ["@caveman-ai/agent", "knap"]) {
    try {
      return await import(`${name}/${subpath}`);
    } catch (error) {
      if (!(MISSING.has(error?.code) && String(error.message).includes(name))) throw error;
    }
  }
  throw new Error(
    'knap-coding-agent: knap is not installed; add "@caveman-ai/agent": "npm:knap" (or "knap") to your dependencies',
  );
}
