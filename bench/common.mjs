// Helpers shared by the bench driver (run.mjs) and its measuring child (child.mjs).
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

export const BENCH_DIR = path.dirname(fileURLToPath(import.meta.url));
export const ROOT = path.dirname(BENCH_DIR);
export const DATA_DIR = path.join(BENCH_DIR, ".data");
export const MIB = 1024 * 1024;
export const GIB = 1024 * MIB;

export function median(values) {
  const s = [...values].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
}

/** Reads VmRSS / VmHWM (bytes) from /proc/self/status. */
export function memStatus() {
  const text = fs.readFileSync("/proc/self/status", "utf8");
  const kb = (key) => {
    const m = new RegExp(`^${key}:\\s+(\\d+) kB`, "m").exec(text);
    return m ? Number(m[1]) * 1024 : NaN;
  };
  return { rss: kb("VmRSS"), hwm: kb("VmHWM") };
}

/** Resets the peak-RSS counter (VmHWM) to the current RSS (Linux ≥ 4.0). */
export function resetPeak() {
  try {
    fs.writeFileSync("/proc/self/clear_refs", "5");
    return true;
  } catch {
    return false;
  }
}

/** Deterministic PRNG (mulberry32). */
export function prng(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

export const fmtMs = (ms) => (ms >= 100 ? ms.toFixed(0) : ms >= 10 ? ms.toFixed(1) : ms.toFixed(2)) + " ms";
export const fmtMiB = (bytes) => (bytes / MIB).toFixed(1) + " MiB";
export const fmtUs = (us) => (us >= 100 ? us.toFixed(0) : us.toFixed(1)) + " µs";
export const fmtX = (x) => (x >= 10 ? x.toFixed(1) : x.toFixed(2)) + "×";
