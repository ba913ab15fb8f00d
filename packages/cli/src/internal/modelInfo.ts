/**
 * The model table of @musekit/models (windows, prices) without the rest of that package: its
 * index also loads every provider client, which `muse` loads only when a provider is used.
 */
export { contextWindow, cost, defaultContextWindow, lookup } from "../../../models/src/ModelInfo.js"
