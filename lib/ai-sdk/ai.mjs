// `ai` is an optional peer dependency: loaded only by the parts that call a model (Task,
// WebFetch with a model).
let loaded;

export async function loadAi() {
  if (!loaded) {
    loaded = import("ai").catch((error) => {
      loaded = undefined;
      const e = new Error("knap/ai-sdk needs the Vercel AI SDK for this feature: npm install ai", { cause: error });
      e.code = "cave_ai_sdk_missing";
      throw e;
    });
  }
  return loaded;
}
