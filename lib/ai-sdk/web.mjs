// WebSearch and WebFetch as plain HTTP clients (Node's fetch): no SDK to install.
//
// * WebSearch: Parallel's search API (`POST {baseUrl}/v1beta/search`, as the parallel-web SDK
//   calls it), or any `search(query, {allowedDomains, blockedDomains, signal})` function.
// * WebFetch: a direct GET of the URL by default (`provider: "direct"`), or Parallel's extract
//   API (`provider: "parallel"`); HTML becomes text; with `model` the prompt is answered from the
//   text through `generateText`, otherwise the text is returned.
// Errors come back as `{error, status_code?, retryable?}` (retryable for 408, 429, 500, 502, 503).
import * as D from "./descriptions.mjs";
import { s, toolSchema } from "./schema.mjs";
import { SDK_TOOL_KEYS, sdkOptions } from "./tools.mjs";
import { refuseUnknownKeys } from "../config-keys.mjs";
import { readCapped } from "../http-body.mjs";
import { loadAi } from "./ai.mjs";

export const PARALLEL_BASE_URL = "https://api.parallel.ai";
export const RETRYABLE_STATUS_CODES = [408, 429, 500, 502, 503];
const DEFAULT_WEB_TIMEOUT_MS = 30_000;
const MAX_FETCH_BYTES = 5 * 1024 * 1024;
const DEFAULT_MAX_CONTENT_LENGTH = 100_000;

class HttpError extends Error {
  constructor(status, statusText, body) {
    super(`HTTP ${status}${statusText ? ` ${statusText}` : ""}${body ? `: ${body.slice(0, 300)}` : ""}`);
    this.status = status;
  }
}

function webError(error, signal) {
  if (error instanceof HttpError || (error && typeof error === "object" && Number.isInteger(error.status))) {
    return { error: error.message || "Request failed", status_code: error.status, retryable: RETRYABLE_STATUS_CODES.includes(error.status) };
  }
  if (signal?.aborted || error?.name === "TimeoutError" || error?.name === "AbortError") {
    return { error: "Request timed out or was aborted", retryable: true };
  }
  const why = error?.cause?.code ?? error?.cause?.message;
  const cause = why ? ` (${why})` : "";
  return { error: `${error instanceof Error ? error.message : "Unknown error"}${cause}` };
}

function signalFor(ms, outer) {
  const signals = [AbortSignal.timeout(ms)];
  if (outer) signals.push(outer);
  return AbortSignal.any ? AbortSignal.any(signals) : signals[0];
}

async function postJson(url, apiKey, body, signal) {
  const res = await fetch(url, {
    method: "POST",
    headers: { "content-type": "application/json", "x-api-key": apiKey ?? "", "parallel-beta": "search-extract-2025-10-10" },
    body: JSON.stringify(body),
    signal,
  });
  const text = await res.text();
  if (!res.ok) throw new HttpError(res.status, res.statusText, text);
  try {
    return JSON.parse(text);
  } catch {
    throw new Error(`Invalid JSON from ${url}`);
  }
}

const hostOf = (url) => {
  try {
    return new URL(url).hostname.toLowerCase();
  } catch {
    return "";
  }
};
const inDomains = (host, domains) => domains.some((d) => host === d.toLowerCase() || host.endsWith(`.${d.toLowerCase()}`));

// -------------------------------------------------------------------------------------------
// WebSearch

const searchSchema = s.object(
  {
    query: s.string("The search query to use"),
    allowed_domains: s.nullableArray({ type: "string" }, "Only include results from these domains"),
    blocked_domains: s.nullableArray({ type: "string" }, "Never include results from these domains"),
  },
  ["query"],
);

/**
 * @param config `{ apiKey?, provider?: "parallel", baseUrl?, search?, maxResults?, timeout? }`
 */
export function createWebSearchTool(config = {}) {
  refuseUnknownKeys("createWebSearchTool", config, ["apiKey", "provider", "baseUrl", "search", "maxResults", "timeout", ...SDK_TOOL_KEYS]);
  const baseUrl = (config.baseUrl ?? process.env.KNAP_PARALLEL_BASE_URL ?? PARALLEL_BASE_URL).replace(/\/+$/, "");
  const maxResults = config.maxResults ?? 10;
  return {
    description: D.WEB_SEARCH,
    inputSchema: toolSchema(searchSchema),
    ...sdkOptions(config),
    async execute({ query, allowed_domains, blocked_domains }, options) {
      const signal = signalFor(config.timeout ?? DEFAULT_WEB_TIMEOUT_MS, options?.abortSignal);
      try {
        let results;
        if (typeof config.search === "function") {
          results = await config.search(query, { allowedDomains: allowed_domains ?? undefined, blockedDomains: blocked_domains ?? undefined, signal });
        } else {
          if (config.provider && config.provider !== "parallel") return { error: `Unknown web search provider: ${config.provider}` };
          if (!config.apiKey) return { error: "WebSearch needs an API key (webSearch.apiKey)" };
          const policy = {};
          if (allowed_domains?.length) policy.include_domains = allowed_domains;
          if (blocked_domains?.length) policy.exclude_domains = blocked_domains;
          const body = { objective: query, search_queries: [query], mode: "agentic", max_results: maxResults };
          if (Object.keys(policy).length) body.source_policy = policy;
          const json = await postJson(`${baseUrl}/v1beta/search`, config.apiKey, body, signal);
          results = (json.results ?? []).map((r) => ({
            title: r.title ?? "",
            url: r.url ?? "",
            snippet: Array.isArray(r.excerpts) ? r.excerpts.join("\n") : r.snippet ?? "",
            metadata: r.publish_date ? { publish_date: r.publish_date } : undefined,
          }));
        }
        // Enforce the domain filters whatever the provider did with them.
        results = (results ?? []).filter((r) => {
          const host = hostOf(r.url);
          if (allowed_domains?.length && !inDomains(host, allowed_domains)) return false;
          if (blocked_domains?.length && inDomains(host, blocked_domains)) return false;
          return true;
        });
        return { results, total_results: results.length, query };
      } catch (error) {
        return webError(error, signal);
      }
    },
  };
}

// -------------------------------------------------------------------------------------------
// WebFetch

const fetchSchema = s.object(
  { url: s.string("The URL to fetch content from"), prompt: s.string("The prompt to run on the fetched content") },
  ["url", "prompt"],
);

const ENTITIES = { amp: "&", lt: "<", gt: ">", quot: '"', apos: "'", nbsp: " " };

/** A readable text of an HTML page: scripts, styles and tags removed, block ends as newlines. */
export function htmlToText(html) {
  return html
    .replace(/<!--[\s\S]*?-->/g, "")
    .replace(/<(script|style|noscript|template|svg|head)\b[\s\S]*?<\/\1\s*>/gi, "")
    .replace(/<br\s*\/?>/gi, "\n")
    .replace(/<\/(p|div|section|article|header|footer|li|ul|ol|tr|table|h[1-6]|pre|blockquote)\s*>/gi, "\n")
    .replace(/<li\b[^>]*>/gi, "- ")
    .replace(/<[^>]+>/g, "")
    .replace(/&(#x[0-9a-f]+|#\d+|[a-z]+);/gi, (m, e) => {
      if (e[0] === "#") {
        const code = e[1] === "x" || e[1] === "X" ? Number.parseInt(e.slice(2), 16) : Number.parseInt(e.slice(1), 10);
        return Number.isFinite(code) && code > 0 && code < 0x110000 ? String.fromCodePoint(code) : m;
      }
      return ENTITIES[e.toLowerCase()] ?? m;
    })
    .replace(/[ \t\f\v\r]+/g, " ")
    .replace(/ *\n */g, "\n")
    .replace(/\n{3,}/g, "\n\n")
    .trim();
}

async function readLimited(res, limit) {
  return (await readCapped(res, limit)).bytes.toString("utf8");
}

async function fetchDirect(url, signal) {
  const res = await fetch(url, { redirect: "follow", signal, headers: { "user-agent": "knap-webfetch/0.1", accept: "text/html,text/plain,application/json;q=0.9,*/*;q=0.5" } });
  if (!res.ok) {
    const body = await readLimited(res, 2000).catch(() => "");
    throw new HttpError(res.status, res.statusText, body);
  }
  const type = (res.headers.get("content-type") ?? "").toLowerCase();
  if (type && !/text\/|json|xml|javascript|yaml|markdown/.test(type)) {
    throw new Error(`Unsupported content type: ${type}`);
  }
  const raw = await readLimited(res, MAX_FETCH_BYTES);
  const content = /html/.test(type) || /^\s*<(!doctype html|html)/i.test(raw) ? htmlToText(raw) : raw;
  return { content, finalUrl: res.url || url, status: res.status };
}

async function fetchParallel(url, config, baseUrl, signal) {
  if (!config.apiKey) throw new Error("WebFetch with provider 'parallel' needs an API key");
  const json = await postJson(`${baseUrl}/v1beta/extract`, config.apiKey, { urls: [url], excerpts: true, full_content: true }, signal);
  const r = json.results?.[0];
  if (!r) throw new Error("No content extracted from URL");
  const content = r.full_content || (Array.isArray(r.excerpts) ? r.excerpts.join("\n\n") : "");
  if (!content) throw new Error("No content available from URL");
  return { content, finalUrl: r.url || url, status: undefined };
}

/**
 * @param config `{ provider?: "direct" | "parallel", apiKey?, model?, baseUrl?, maxContentLength?, timeout? }`
 */
export function createWebFetchTool(config = {}) {
  refuseUnknownKeys("createWebFetchTool", config, ["provider", "apiKey", "model", "baseUrl", "maxContentLength", "timeout", ...SDK_TOOL_KEYS]);
  const provider = config.provider ?? "direct";
  const baseUrl = (config.baseUrl ?? process.env.KNAP_PARALLEL_BASE_URL ?? PARALLEL_BASE_URL).replace(/\/+$/, "");
  const maxContent = config.maxContentLength ?? DEFAULT_MAX_CONTENT_LENGTH;
  return {
    description: D.WEB_FETCH,
    inputSchema: toolSchema(fetchSchema),
    ...sdkOptions(config),
    async execute({ url, prompt }, options) {
      const signal = signalFor(config.timeout ?? DEFAULT_WEB_TIMEOUT_MS, options?.abortSignal);
      try {
        let parsed;
        try {
          parsed = new URL(url);
        } catch {
          return { error: `Invalid URL: ${url}` };
        }
        if (parsed.protocol !== "http:" && parsed.protocol !== "https:") return { error: `Unsupported URL scheme: ${parsed.protocol}` };
        const got =
          provider === "parallel"
            ? await fetchParallel(url, config, baseUrl, signal)
            : provider === "direct"
              ? await fetchDirect(url, signal)
              : (() => {
                  throw new Error(`Unknown web fetch provider: ${provider}`);
                })();
        let content = got.content;
        if (content.length > maxContent) content = `${content.slice(0, maxContent)}\n\n[Content truncated: ${got.content.length} characters in total]`;
        let response = content;
        if (config.model) {
          const { generateText } = await loadAi();
          const result = await generateText({ model: config.model, prompt: `${prompt}\n\nContent from ${url}:\n\n${content}`, abortSignal: options?.abortSignal });
          response = result.text;
        }
        const out = { response, url, final_url: got.finalUrl || url };
        if (got.status !== undefined) out.status_code = got.status;
        return out;
      } catch (error) {
        return webError(error, signal);
      }
    },
  };
}
