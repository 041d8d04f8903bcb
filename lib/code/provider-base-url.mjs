// codingModelsAtProviderBaseURL(): a model catalog whose models of one provider talk to another
// base URL (a proxy, a local server). The run stays a direct provider run.
import { codedError } from "../native.mjs";
import { builtinModels, MODELS_READY } from "../models.mjs";

function rewrite(model, provider, baseUrl) {
  return model && model.provider === provider ? { ...model, baseUrl } : model;
}

/**
 * `codingModelsAtProviderBaseURL(modelID, rawBaseURL, source = builtinModels())`: `source` with
 * `getModel`, `getModels` and `getAvailable` rewriting `baseUrl` on every model of `modelID`'s
 * provider. Without `source`, pi-ai's catalog is loaded when a run first needs it.
 */
export function codingModelsAtProviderBaseURL(modelID, rawBaseURL, source) {
  const slash = typeof modelID === "string" ? modelID.indexOf("/") : -1;
  if (slash <= 0 || slash === modelID.length - 1) throw codedError("coding_provider_base_url_model_invalid");
  const provider = modelID.slice(0, slash);
  let url;
  try {
    url = new URL(String(rawBaseURL));
  } catch {
    throw codedError("coding_provider_base_url_invalid");
  }
  if ((url.protocol !== "http:" && url.protocol !== "https:") || url.username !== "" || url.password !== "") {
    throw codedError("coding_provider_base_url_invalid");
  }
  const baseUrl = String(rawBaseURL).replace(/\/+$/, "");
  let loaded = source;
  const target = source ?? {
    // Loaded on first use by a run (RunOptions.models is awaited through MODELS_READY).
    [MODELS_READY]: async () => {
      loaded ??= await builtinModels();
    },
  };
  const catalog = () => {
    if (!loaded) throw new Error("caveman agent: the model catalog is not loaded yet");
    return loaded;
  };
  return new Proxy(target, {
    get(t, key) {
      if (key === "getModel") return (p, id) => rewrite(catalog().getModel(p, id), provider, baseUrl);
      if (key === "getModels") return (...args) => (catalog().getModels?.(...args) ?? []).map((m) => rewrite(m, provider, baseUrl));
      if (key === "getAvailable") return (...args) => (catalog().getAvailable?.(...args) ?? []).map((m) => rewrite(m, provider, baseUrl));
      if (key === MODELS_READY) return t[MODELS_READY];
      const value = (loaded ?? t)[key];
      return typeof value === "function" ? value.bind(loaded ?? t) : value;
    },
  });
}
