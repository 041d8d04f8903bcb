// `@caveman-ai/agent/model-usage` (typings: the same declarations as the root's).
export { defineModelUsage, modelUsageAccountingStatus, requireCompleteModelUsage } from "../surface.mjs";
export type { ModelUsage, CompleteModelUsage, ModelUsageAccountingStatus, ModelUsageCost, ModelUsageTokenCount } from "../reference-types.mjs";
